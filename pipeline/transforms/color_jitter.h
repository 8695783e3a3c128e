// ColorJitter: torchvision.transforms.ColorJitter(brightness, contrast, saturation, hue) (0.14)
// on one CHW sample of 1 or 3 channels. Each factor's range is torchvision's: a number b gives
// [max(0, 1 - b), 1 + b] (hue h: [-h, h], h at most 0.5), a pair (lo, hi) is the range, and 0
// or None (or brightness/contrast/saturation (1, 1), hue (0, 0)) leaves that adjustment out.
// Per sample it draws an order of the four (a uniform permutation, torchvision's randperm(4)),
// then a factor for each one in use, uniform in its range and rounded to float32 as
// torchvision's torch.empty(1).uniform_ draws it, and applies them in that order. The
// arithmetic (internal/color.h) is either library's, by the user's pipeline (docs/transforms.md,
// "PIL or tensor semantics"):
//   tensor (pil=False): F.adjust_brightness / contrast / saturation / hue on a tensor, u8 or
//     f32 samples (f32 in [0, 1]);
//   PIL (pil=True): ImageEnhance.Brightness / Contrast / Color and F_pil.adjust_hue, u8 only.
// Draws() reports the order and the factors. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_COLOR_JITTER_H_
#define SLUICE_PIPELINE_TRANSFORMS_COLOR_JITTER_H_

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class ColorJitter final : public Transform {
 public:
  static constexpr absl::string_view kName = "ColorJitter";
  static constexpr absl::string_view kParams[] = {"brightness", "contrast", "saturation", "hue",
                                                  "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  // A factor's range, or nullopt when the adjustment is left out.
  using Range = std::optional<std::array<double, 2>>;
  // One sample's draws: the order of the four adjustments (0 brightness, 1 contrast,
  // 2 saturation, 3 hue) and the factor of each one in use.
  struct Params {
    std::array<int, 4> order{};
    std::array<std::optional<float>, 4> factors;
  };

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // evaluation keeps the colours
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  Params Draw(SampleRandom& rng) const;

 private:
  ColorJitter(std::array<Range, 4> ranges, bool pil) : ranges_(ranges), pil_(pil) {}
  std::array<Range, 4> ranges_;  // brightness, contrast, saturation, hue
  bool pil_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_COLOR_JITTER_H_
