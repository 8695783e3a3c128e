// RandomEqualize: torchvision.transforms.RandomEqualize(p=0.5) (0.14) on one CHW u8 sample of 1
// or 3 channels: with probability p (a uniform draw u in [0, 1) below p) F.equalize, each
// channel's histogram equalized through torchvision's _scale_channel table (internal/
// pixel_ops.h); otherwise the sample unchanged. u8 only, as torchvision (put it before ToTensor,
// Normalize or ToDtype). PIL's ImageOps.equalize builds the same table in the same integers
// (its values past 255, which torch clamps, are clipped when PIL applies it), so there is no
// pil argument. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_EQUALIZE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_EQUALIZE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomEqualize final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomEqualize";
  static constexpr absl::string_view kParams[] = {"p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // Whether this sample is equalized: one uniform draw below p.
  bool Draw(SampleRandom& rng) const { return rng.UniformDouble() < p_; }

 private:
  explicit RandomEqualize(double p) : p_(p) {}
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_EQUALIZE_H_
