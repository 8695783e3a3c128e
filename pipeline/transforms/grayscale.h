// Grayscale: torchvision.transforms.Grayscale(num_output_channels) (0.14) on one CHW sample,
// with either semantics of the user's pipeline
// (docs/transforms.md, "PIL or tensor semantics"):
//   tensor (pil=False): F.rgb_to_grayscale, l = 0.2989 r + 0.587 g + 0.114 b in float32 (each
//     product and sum rounded as torch rounds them), cast back to the input's dtype (u8
//     truncates); u8 or f32 samples. A 1-channel sample is returned as it is (num_output_channels
//     3 included: torchvision's expand keeps its one channel).
//   PIL (pil=True): Image.convert("L"), ITU-R 601-2 in fixed point, (19595 r + 38470 g + 7471 b
//     + 2^15) >> 16; u8 samples only; num_output_channels=3 repeats the grey plane (1-channel
//     samples too), as F.to_grayscale does.
// Both bit for bit (python/tests/test_transforms_oracle.py). Inputs of 1 or 3 channels.
// Deterministic: evaluation keeps it. RandomGrayscale: random_grayscale.h.
#ifndef SLUICE_PIPELINE_TRANSFORMS_GRAYSCALE_H_
#define SLUICE_PIPELINE_TRANSFORMS_GRAYSCALE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class Grayscale final : public Transform {
 public:
  static constexpr absl::string_view kName = "Grayscale";
  static constexpr absl::string_view kParams[] = {"num_output_channels", "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;

 private:
  Grayscale(uint32_t channels, bool pil) : channels_(channels), pil_(pil) {}
  uint32_t channels_;  // num_output_channels: 1 or 3
  bool pil_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_GRAYSCALE_H_
