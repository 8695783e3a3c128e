// RandomVerticalFlip: torchvision.transforms.RandomVerticalFlip (0.14) on one CHW sample: with
// probability p (a uniform draw u in [0, 1) from the sample's SampleRandom, flipped when u < p:
// p = 1 always flips, p = 0 never), reverses the order of the rows of every channel, as
// F.vflip does on a tensor and Image.transpose(FLIP_TOP_BOTTOM) on a PIL image (the same
// pixels: a flip moves values, it computes none). Any element type.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_VERTICAL_FLIP_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_VERTICAL_FLIP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomVerticalFlip final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomVerticalFlip";
  static constexpr absl::string_view kParams[] = {"p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  // kInvalidArgument unless 0 <= p <= 1.
  static absl::StatusOr<std::unique_ptr<RandomVerticalFlip>> Create(double p);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // evaluation flips nothing
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

 private:
  explicit RandomVerticalFlip(double p) : p_(p) {}
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_VERTICAL_FLIP_H_
