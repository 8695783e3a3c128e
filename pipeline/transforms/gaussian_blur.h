// GaussianBlur: torchvision.transforms.GaussianBlur(kernel_size, sigma=(0.1, 2.0)) (0.14) on one
// CHW sample of any channel count. kernel_size is an int (a square) or (kx, ky), torchvision's
// order: kx along the width, ky along the height; each odd, positive and at most 255. sigma is
// a number > 0 (fixed) or a pair (min, max), 0 < min <= max. Per sample it draws one sigma,
// uniform in [min, max] and rounded to float32 as torchvision's torch.empty(1).uniform_ draws it
// (drawn even when min == max), used on both axes. Tensor semantics (F.gaussian_blur; a PIL
// image takes the same path through a tensor): float32 weights exp(-0.5 (x / sigma)^2) / sum
// over x = -(k - 1) / 2 .. (k - 1) / 2, the image padded by reflection (torch's 'reflect':
// kx / 2 columns and ky / 2 rows, each less than the side it mirrors), convolved per channel in
// float32; u8 samples are rounded half to even. sluice blurs along the rows, then along the
// columns (internal/gaussian_blur_kernel.h), so float32 results differ from torch's 2-D
// convolution by rounding only (measured, python/tests/test_gaussian_blur.py): f32 samples in
// [0, 1] at most 1.25e-6 apart for kernels up to 31 (4.1e-5 at 255x255, mostly torch's own
// rounding: sluice is within 1.1e-6 of the float64 convolution); u8 samples at most 1 apart, in
// 2.6e-5 of the values (2.6e-4 at 255x255).
// u8 or f32 samples. Draws() reports the sigma. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_GAUSSIAN_BLUR_H_
#define SLUICE_PIPELINE_TRANSFORMS_GAUSSIAN_BLUR_H_

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class GaussianBlur final : public Transform {
 public:
  static constexpr absl::string_view kName = "GaussianBlur";
  static constexpr absl::string_view kParams[] = {"kernel_size", "sigma"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // an augmentation: evaluation skips it
  // The input spec; kInvalidArgument for a dtype other than u8 or f32, or an image whose height
  // is at most ky / 2 or whose width is at most kx / 2 (reflect padding mirrors less than a side).
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  // Allocates its scratch; the chain calls ApplyWithScratch.
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  void ApplyWithScratch(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng,
                        void* scratch) const override;
  absl::StatusOr<SampleSpec> ApplyVariable(const SampleSpec& in, const SampleBuffers& io,
                                           SampleRandom& rng) const override;
  size_t ScratchBytes(const SampleSpec& bound) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

  // One sample's sigma.
  float Draw(SampleRandom& rng) const;

 private:
  GaussianBlur(int kx, int ky, std::array<double, 2> sigma) : kx_(kx), ky_(ky), sigma_(sigma) {}
  int kx_, ky_;                  // along the width, along the height
  std::array<double, 2> sigma_;  // min, max
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_GAUSSIAN_BLUR_H_
