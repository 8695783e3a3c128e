// RandomApply: torchvision.transforms.RandomApply(transforms, p=0.5) (0.14) over sluice ops:
// with probability p (a uniform draw u in [0, 1) below p) the ops of `transforms` in turn,
// otherwise the sample unchanged. A skipped RandomApply leaves the sample as it is, so its ops
// must give back samples of the input's type and size (ColorJitter, GaussianBlur, flips,
// Pad then RandomCrop...): one that does not is refused naming both specs. The ops run on
// samples of one size (after the op that fixes it). They draw from this op's SampleRandom after
// its own draw, in order. Written in the grammar as RandomApply([ColorJitter(0.4, 0.4, 0.4)],
// p=0.8). Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_APPLY_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_APPLY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/op_sequence.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomApply final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomApply";
  static constexpr absl::string_view kParams[] = {"transforms", "p"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  size_t ScratchBytes(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  void ApplyWithScratch(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng,
                        void* scratch) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

 private:
  RandomApply(transforms_internal::OpList ops, double p) : ops_(std::move(ops)), p_(p) {}
  transforms_internal::OpList ops_;
  double p_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_APPLY_H_
