// RandomChoice: torchvision.transforms.RandomChoice(transforms, p=None) (0.14) over sluice ops:
// one op of `transforms` per sample, drawn with the weights `p` (None: each equally likely;
// torchvision's random.choices), then applied. Every op must make samples of one type and size
// from the input (the batch holds one shape): one that differs is refused naming both specs.
// The ops run on samples of one size (after the op that fixes it); the chosen one draws from
// this op's SampleRandom after the choice. Written in the grammar as
// RandomChoice([RandomHorizontalFlip(1), RandomVerticalFlip(1)], p=[3, 1]). Evaluation leaves
// it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_CHOICE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_CHOICE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/op_sequence.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomChoice final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomChoice";
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

  // The op this sample runs: its index in `transforms`.
  size_t Choose(SampleRandom& rng) const;

 private:
  RandomChoice(transforms_internal::OpList ops, std::optional<std::vector<double>> weights);
  transforms_internal::OpList ops_;
  std::optional<std::vector<double>> weights_;  // as given (the identity's)
  std::vector<double> cumulative_;              // running sums of the weights (1 each if none)
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_CHOICE_H_
