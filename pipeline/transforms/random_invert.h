// RandomInvert: torchvision.transforms.RandomInvert(p=0.5) (0.14) on one CHW sample of 1 or 3
// channels: with probability p (a uniform draw u in [0, 1) below p) F.invert, bound - x (255 - x
// on u8, 1 - x on f32 in [0, 1]); otherwise the sample unchanged. PIL's ImageOps.invert gives
// the same bytes on u8 images (255 - x through a table), so there is no pil argument.
// Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_INVERT_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_INVERT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomInvert final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomInvert";
  static constexpr absl::string_view kParams[] = {"p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // Whether this sample is inverted: one uniform draw below p.
  bool Draw(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  explicit RandomInvert(double p) : p_(p) {}
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_INVERT_H_
