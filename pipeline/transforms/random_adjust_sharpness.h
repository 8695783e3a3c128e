// RandomAdjustSharpness: torchvision.transforms.RandomAdjustSharpness(sharpness_factor, p=0.5)
// (0.14) on one CHW sample of 1 or 3 channels: with probability p (a uniform draw u in [0, 1)
// below p) F.adjust_sharpness, a blend of the image with its 3x3 smoothed copy
// ([[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 inside a one-pixel border that keeps its values):
// factor 0 gives the smoothed image, 1 the image, 2 a sharper one; otherwise the sample
// unchanged. sharpness_factor is a non-negative number. The arithmetic is either library's
// (internal/pixel_ops.h), by the user's pipeline (docs/transforms.md, "PIL or tensor
// semantics"):
//   tensor (pil=False): functional_tensor's float32 convolution (u8 rounded half to even) and
//     _blend, factor * x + (1 - factor) * blurred, clamped, u8 truncated; images 2 pixels or
//     fewer high or wide unchanged; u8 or f32 samples (f32 in [0, 1]);
//   PIL (pil=True): ImageEnhance.Sharpness: PIL's SMOOTH filter (rounded from 0.5 and
//     truncated) and Image.blend(smoothed, image, factor); u8 only.
// Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_ADJUST_SHARPNESS_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_ADJUST_SHARPNESS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomAdjustSharpness final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomAdjustSharpness";
  static constexpr absl::string_view kParams[] = {"sharpness_factor", "p", "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // Whether this sample is sharpened: one uniform draw below p.
  bool Draw(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  RandomAdjustSharpness(double factor, double p, bool pil) : factor_(factor), p_(p), pil_(pil) {}
  double factor_;
  double p_;
  bool pil_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_ADJUST_SHARPNESS_H_
