// Normalize: torchvision.transforms.Normalize (0.14) per channel on one CHW sample, to f32.
// u8 input is taken as ToTensor's x / 255 first: y = (x/255 - mean[c]) / std[c]; f32 input
// gives y = (x - mean[c]) / std[c]. Each is the IEEE single-precision arithmetic torchvision
// does (ToTensor's division, then sub_ and div_), so the bits are the same. A mean or std of
// length 1 applies to every channel, as torchvision's broadcast does.
//
// Each channel plane runs through its own SampleConverter (pipeline/convert.h) with that
// channel's mean and std: the converter's proven vector kernel, no second implementation.
#ifndef SLUICE_PIPELINE_TRANSFORMS_NORMALIZE_H_
#define SLUICE_PIPELINE_TRANSFORMS_NORMALIZE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/convert.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class Normalize final : public Transform {
 public:
  static constexpr absl::string_view kName = "Normalize";
  static constexpr absl::string_view kParams[] = {"mean", "std"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  // kInvalidArgument for an empty list, lengths that are neither 1 nor the same, a std of zero
  // or a value that is not finite.
  static absl::StatusOr<std::unique_ptr<Normalize>> Create(std::vector<float> mean,
                                                           std::vector<float> std);

  std::string Identity() const override;
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;

 private:
  absl::Status CheckToTensorScale() const;
  Normalize() = default;

  std::vector<float> mean_;
  std::vector<float> std_;
  // One per channel (or one for all): for u8 input and for f32 input.
  std::vector<SampleConverter> from_u8_;
  std::vector<SampleConverter> from_f32_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_NORMALIZE_H_
