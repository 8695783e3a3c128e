// RandomAffine: torchvision.transforms.RandomAffine(degrees, translate, scale, shear,
// interpolation, fill, center) (0.14) on one CHW sample, keeping the centre (or `center`)
// invariant. degrees: a number d >= 0 (the range (-d, d)) or (lo, hi); translate None or (a, b),
// fractions of the width and height in [0, 1]; scale None or (lo, hi) with 0 < lo <= hi; shear
// None, a number s >= 0 (x in (-s, s)), (lo, hi) for x, or four values (x lo, x hi, y lo, y hi);
// interpolation nearest (the default) or bilinear; fill a number or one per channel (None is 0);
// center None or (x, y) in pixels. Per sample torchvision's get_params, in its order: the angle
// uniform in degrees; tx = round(uniform(-a W, a W)), ty = round(uniform(-b H, b H)) (halves to
// even, as Python's round); the scale uniform in its range (1 when None); shear x and y uniform
// (0 when not given); each uniform draw rounded to float32 as torch.empty(1).uniform_ draws it.
// The arithmetic (internal/affine_sample.h) is either library's (docs/transforms.md, "PIL or
// tensor semantics"):
//   tensor (pil=False): F.affine on a tensor, u8 or f32, any channel count;
//   PIL (pil=True): F_pil.affine, Image.transform(AFFINE) of Pillow 9.4 with the matrix of
//     _get_inverse_affine_matrix about (w / 2, h / 2), u8 of 1 or 3 channels.
// Draws() reports the angle, translate, scale and shear. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_AFFINE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_AFFINE_H_

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/affine_sample.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomAffine final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomAffine";
  static constexpr absl::string_view kParams[] = {"degrees",       "translate", "scale",  "shear",
                                                  "interpolation", "fill",      "center", "pil"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  // One sample's draws, as torchvision's get_params returns them.
  struct Params {
    float angle = 0;
    std::array<int64_t, 2> translate{};
    float scale = 1;
    std::array<float, 2> shear{};
  };

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation: evaluation skips it
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // The draws for a sample of spec `in` (translate is a fraction of its size).
  Params Draw(const SampleSpec& in, SampleRandom& rng) const;

 private:
  RandomAffine(transforms_internal::AffineCommonArgs common,
               std::optional<std::array<double, 2>> translate,
               std::optional<std::array<double, 2>> scale, std::vector<double> shear)
      : common_(std::move(common)),
        translate_(translate),
        scale_(scale),
        shear_(std::move(shear)) {}

  transforms_internal::AffineCommonArgs common_;
  std::optional<std::array<double, 2>> translate_;  // max fractions (a, b)
  std::optional<std::array<double, 2>> scale_;      // (lo, hi)
  std::vector<double> shear_;                       // empty, 2 (x) or 4 (x, y) bounds
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_AFFINE_H_
