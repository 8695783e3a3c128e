// The grey conversion both Grayscale and RandomGrayscale run (grayscale.h has the semantics):
// torchvision's tensor arithmetic or PIL's convert("L"), bit for bit. Built without FMA
// contraction (-ffp-contract=off): the float32 luma rounds each product and sum as torch does.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_LUMA_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_LUMA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

// torchvision's float32 luma, each product and sum rounded as torch rounds them. Include only
// from files built without FMA contraction (-ffp-contract=off: luma.cc, color.cc).
inline float TensorLuma(float r, float g, float b) {
  const float rg = 0.2989f * r + 0.587f * g;
  return rg + 0.114f * b;
}

// Pillow's L24: ITU-R 601-2 luma in 16-bit fixed point, rounded (Image.convert("L")).
inline uint8_t PilLuma(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

// What both ops accept: 1 or 3 channels; u8 or f32 (tensor), u8 (PIL). kInvalidArgument naming
// `op` and the spec otherwise.
absl::Status CheckGreyInput(absl::string_view op, const SampleSpec& in, bool pil);

// The output's channels: PIL repeats the grey plane to num_output_channels; the tensor path
// keeps a 1-channel input's one channel (torchvision's expand to the input's shape).
inline uint32_t GreyOutputChannels(const SampleSpec& in, uint32_t requested, bool pil) {
  return pil || in.channels == 3 ? requested : 1;
}

// The grey plane of `in` (1 or 3 channels) into `dst`, repeated to `out_channels` planes.
void ToGrey(const SampleSpec& in, const void* src, void* dst, uint32_t out_channels, bool pil);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_LUMA_H_
