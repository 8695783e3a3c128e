// RandomRotation: torchvision.transforms.RandomRotation(degrees, interpolation, expand, center,
// fill) (0.14) on one CHW sample. degrees is a number d >= 0 (the range (-d, d)) or (lo, hi);
// interpolation nearest (the default) or bilinear; expand=False only (expand=True would make the
// output size vary per sample: refused); center None (the image's centre) or (x, y) in pixels;
// fill a number or one per channel (None is 0). Per sample one angle, uniform in the range and
// rounded to float32 as torchvision's float(torch.empty(1).uniform_(lo, hi)), counter-clockwise.
// The arithmetic (internal/affine_sample.h) is either library's (docs/transforms.md, "PIL or
// tensor semantics"):
//   tensor (pil=False): F.rotate on a tensor (the inverse matrix of -angle, _gen_affine_grid,
//     grid_sample and torchvision's fill mask), u8 or f32, any channel count;
//   PIL (pil=True): Image.rotate(angle, resample, expand=False, center, fillcolor) of Pillow 9.4,
//     u8 of 1 or 3 channels.
// Draws() reports the angle. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_ROTATION_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_ROTATION_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/affine_sample.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomRotation final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomRotation";
  static constexpr absl::string_view kParams[] = {"degrees", "interpolation", "expand",
                                                  "center",  "fill",          "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation: evaluation skips it
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // One sample's angle in degrees (float32, as torchvision draws it).
  float Draw(SampleRandom& rng) const;

 private:
  explicit RandomRotation(transforms_internal::AffineCommonArgs args) : args_(std::move(args)) {}
  transforms_internal::AffineCommonArgs args_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_ROTATION_H_
