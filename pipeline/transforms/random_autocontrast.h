// RandomAutocontrast: torchvision.transforms.RandomAutocontrast(p=0.5) (0.14) on one CHW sample
// of 1 or 3 channels: with probability p (a uniform draw u in [0, 1) below p) F.autocontrast,
// each channel stretched so its smallest value becomes 0 and its largest the bound; otherwise
// the sample unchanged. A channel of one value is left as it is. The arithmetic is either
// library's (internal/pixel_ops.h), by the user's pipeline (docs/transforms.md, "PIL or tensor
// semantics"):
//   tensor (pil=False): functional_tensor's (x - min) * (1 / (max - min) * bound) in float32,
//     clamped, truncated to u8; u8 or f32 samples (f32 in [0, 1]);
//   PIL (pil=True): ImageOps.autocontrast's table, int(x * scale + offset) in double with
//     scale = 255 / (hi - lo); u8 only. The two differ by a level on some values (the float32
//     scale of the tensor path against PIL's double).
// Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_AUTOCONTRAST_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_AUTOCONTRAST_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomAutocontrast final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomAutocontrast";
  static constexpr absl::string_view kParams[] = {"p", "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // Whether this sample is stretched: one uniform draw below p.
  bool Draw(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  RandomAutocontrast(double p, bool pil) : p_(p), pil_(pil) {}
  double p_;
  bool pil_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_AUTOCONTRAST_H_
