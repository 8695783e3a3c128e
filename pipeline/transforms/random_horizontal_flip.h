// RandomHorizontalFlip: torchvision.transforms.RandomHorizontalFlip (0.14) on one CHW sample:
// with probability p (a uniform draw u in [0, 1) from the sample's SampleRandom, flipped when
// u < p: p = 1 always flips, p = 0 never), reverses every row. Any element type.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_HORIZONTAL_FLIP_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_HORIZONTAL_FLIP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomHorizontalFlip final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomHorizontalFlip";
  static constexpr absl::string_view kParams[] = {"p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  // kInvalidArgument unless 0 <= p <= 1.
  static absl::StatusOr<std::unique_ptr<RandomHorizontalFlip>> Create(double p);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // evaluation flips nothing
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // This sample's draw: true when it is flipped. Apply makes it first; the chain's fused path
  // (transform_chain.h) makes it instead and mirrors the resize before.
  bool Flips(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  explicit RandomHorizontalFlip(double p) : p_(p) {}
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_HORIZONTAL_FLIP_H_
