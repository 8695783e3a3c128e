// Bilinear resampling as torch.nn.functional.interpolate(mode="bilinear", align_corners=False,
// antialias=False) computes it (torch 1.13's upsample_bilinear2d on the CPU), applied to a window
// of a CHW sample: the resize of Resize and of RandomResizedCrop's crop.
//
// Per output coordinate d of an axis resized from n to m: scale = float32(n) / float32(m),
// s = max(scale * (d + 0.5) - 0.5, 0) in double, i0 = int(s), i1 = i0 + (i0 < n - 1), weights
// l1 = float32(s - i0), l0 = float32(1 - (s - i0)); the value, in float32, is
// l0y * (l0x * v00 + l1x * v01) + l1y * (l0x * v10 + l1x * v11). Values are read and computed as
// float32 (f16 and bf16 widened, as torchvision's resize casts them), then stored back in the
// sample's dtype: u8 rounds half to even, as torchvision's resize of a uint8 tensor (torch.round,
// then the cast).
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_BILINEAR_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_BILINEAR_H_

#include <cstdint>

#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

// One output coordinate's two source coordinates (relative to the window) and their weights.
struct BilinearTap {
  int64_t i0 = 0;
  int64_t i1 = 0;
  float l0 = 1;
  float l1 = 0;
};

// The tap of output coordinate d on an axis resized from n to m, scale = float32(n) /
// float32(m): torch's area_pixel_compute_source_index and compute_source_index_and_lambda (the
// formula above). Every bilinear kernel of sluice takes its weights from here.
BilinearTap BilinearTapOf(int64_t d, float scale, int64_t n);

// The window of the sample `spec` (CHW, fixed) at rows [top, top + win_h) and columns
// [left, left + win_w), resized to out_h x out_w into dst (spec.channels x out_h x out_w of
// spec.dtype). Uses a few KiB of stack; allocates nothing.
void ResizeBilinear(const SampleSpec& spec, const void* src, uint32_t top, uint32_t left,
                    uint32_t win_h, uint32_t win_w, uint32_t out_h, uint32_t out_w, void* dst);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_BILINEAR_H_
