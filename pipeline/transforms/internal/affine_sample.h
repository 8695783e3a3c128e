// The geometry RandomRotation and RandomAffine share (torchvision 0.14): their common arguments,
// torchvision's inverse affine matrix, and the sampling loops that map one CHW sample through it.
//
//   Tensor semantics (F.rotate / F.affine on a tensor, F_t.affine): the matrix is rounded to
//   float32, the grid of pixel centres is _gen_affine_grid's (base @ theta.T / [w/2, h/2]) and
//   grid_sample(align_corners=False, padding zeros) samples it, with torchvision's fill mask
//   (nearest: the fill where the nearest source pixel is outside; bilinear: out * mask +
//   (1 - mask) * fill). The float32 steps are torch's own, fused multiply-adds where the CPU
//   build of torch 1.13 fuses them (its AVX2 kernels), so the result is torch's bit for bit on
//   that build (measured, python/tests/test_random_affine.py). u8 samples are computed as float32
//   and rounded half to even, as torchvision's _cast_squeeze_out.
//   PIL semantics (u8, 1 or 3 channels): Image.transform(AFFINE) of Pillow 9.4 (libImaging
//   Geometry.c): nearest by its scale, 16.16 fixed-point and float paths, bilinear in double
//   with the edge pixels repeated, truncated to u8; outside the image the fill color.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_AFFINE_SAMPLE_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_AFFINE_SAMPLE_H_

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice::transforms_internal {

enum class AffineInterpolation { kNearest, kBilinear };

// The arguments both ops take, parsed and checked.
struct AffineCommonArgs {
  std::array<double, 2> degrees{};  // the angle's range (lo, hi)
  AffineInterpolation interpolation = AffineInterpolation::kNearest;
  std::optional<std::array<double, 2>> center;  // (x, y) in pixels; nullopt: the image's centre
  std::vector<double> fill{0.0};                // one value, or one per channel
  bool pil = false;
};

// degrees, interpolation, center, fill and pil of op `args` (RandomRotation also checks expand).
absl::StatusOr<AffineCommonArgs> ParseAffineCommonArgs(const TransformArgs& args);

// `name` as a range: a number v >= 0 is (-v, v); a list of `pair_count` pairs (lo, hi) with
// lo <= hi, all finite. Returns the flat list (2 or 4 values).
absl::StatusOr<std::vector<double>> AngleRangeArg(const TransformArgs& args, absl::string_view name,
                                                  std::vector<size_t> sizes);

// "interpolation=nearest, center=None, fill=0, pil=False" style pieces for the identities.
std::string InterpolationText(AffineInterpolation mode);
std::string CenterText(const std::optional<std::array<double, 2>>& center);
std::string FillText(const std::vector<double>& fill);

// OutputSpec's checks: CHW pixels; u8 or f32 (PIL: u8, 1 or 3 channels); a fill of one value or
// one per channel, within [0, 255] on u8 samples.
absl::Status CheckAffineInput(absl::string_view op, const SampleSpec& in,
                              const AffineCommonArgs& common);

// One float32 draw uniform in [lo, hi], as torch.empty(1).uniform_(lo, hi).
float UniformFloat(SampleRandom& rng, double lo, double hi);

// torchvision's _get_inverse_affine_matrix(center, angle, translate, scale, shear) with
// inverted=True, in double as Python computes it (angles in degrees).
std::array<double, 6> InverseAffineMatrix(std::array<double, 2> center, double angle,
                                          std::array<double, 2> translate, double scale,
                                          std::array<double, 2> shear);

// Pillow's Image.rotate(angle, resample, expand=False, center) matrix (its own, with cos and sin
// rounded to 15 decimals); `center` in pixels.
std::array<double, 6> PilRotateMatrix(double angle, std::array<double, 2> center);

// F_t.affine / F_t.rotate (expand=False) of `in` (u8 or f32, CHW) through `matrix` (torchvision's
// centred inverse matrix), fill one value or one per channel.
void TensorAffine(const SampleSpec& in, const void* src, void* dst,
                  const std::array<double, 6>& matrix, AffineInterpolation mode,
                  const std::vector<double>& fill);

// Pillow's Image.transform(size, AFFINE, matrix, resample, fillcolor) of a u8 CHW sample, the
// fill truncated to int as torchvision's _parse_fill.
void PilAffine(const SampleSpec& in, const void* src, void* dst,
               const std::array<double, 6>& matrix, AffineInterpolation mode,
               const std::vector<double>& fill);

// Pillow's Image.rotate(angle, resample, expand=False, center, fillcolor): its fast paths (0,
// 180, and 90 or 270 of a square image, without a center), else PilAffine of PilRotateMatrix.
void PilRotate(const SampleSpec& in, const void* src, void* dst, double angle,
               const std::optional<std::array<double, 2>>& center, AffineInterpolation mode,
               const std::vector<double>& fill);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_AFFINE_SAMPLE_H_
