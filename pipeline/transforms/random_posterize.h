// RandomPosterize: torchvision.transforms.RandomPosterize(bits, p=0.5) (0.14) on one CHW u8
// sample of 1 or 3 channels: with probability p (a uniform draw u in [0, 1) below p) F.posterize,
// each value's low 8 - bits bits cleared (x & ~(2^(8 - bits) - 1); bits in [0, 8], 0 blackens
// the image); otherwise the sample unchanged. u8 only, as torchvision (put it before ToTensor,
// Normalize or ToDtype). PIL's ImageOps.posterize gives the same bytes (the same mask through a
// table), so there is no pil argument. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_POSTERIZE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_POSTERIZE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomPosterize final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomPosterize";
  static constexpr absl::string_view kParams[] = {"bits", "p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // Whether this sample is posterized: one uniform draw below p.
  bool Draw(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  RandomPosterize(int bits, double p) : bits_(bits), p_(p) {}
  int bits_;
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_POSTERIZE_H_
