// RandomSolarize: torchvision.transforms.RandomSolarize(threshold, p=0.5) (0.14) on one CHW
// sample of 1 or 3 channels: with probability p (a uniform draw u in [0, 1) below p)
// F.solarize, every value at or above `threshold` inverted (bound - x: 255 - x on u8, 1 - x on
// f32 in [0, 1]), the others kept; otherwise the sample unchanged. torch compares in float32
// (the threshold rounded to float32); a threshold above the bound (255 for u8, 1 for f32) is
// refused, as torchvision does, and so is a negative one (torch wraps a negative int threshold
// to uint8 on u8 images: RandomInvert inverts every value). PIL's ImageOps.solarize gives the same
// bytes on u8 images (x < threshold keeps x, else 255 - x), so there is no pil argument; the two
// differ only for a threshold a hair above an integer k that rounds to k in float32 (128.000001),
// where torch inverts k and PIL keeps it. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_SOLARIZE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_SOLARIZE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomSolarize final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomSolarize";
  static constexpr absl::string_view kParams[] = {"threshold", "p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // Whether this sample is solarized: one uniform draw below p.
  bool Draw(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  RandomSolarize(double threshold, double p) : threshold_(threshold), p_(p) {}
  double threshold_;
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_SOLARIZE_H_
