#include "pipeline/transforms/gaussian_blur.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/gaussian_blur_kernel.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {
using transforms_internal::kMaxGaussianKernel;

absl::StatusOr<std::unique_ptr<Transform>> GaussianBlur::FromArgs(const TransformArgs& args) {
  const std::string kernel_expected =
      absl::StrCat("an odd positive integer at most ", kMaxGaussianKernel,
                   " or a pair (kx, ky) of them (torchvision: \"Kernel size value should be an odd "
                   "and positive number.\")");
  absl::StatusOr<std::vector<int64_t>> kernel = args.Ints("kernel_size", {1, 2}, std::nullopt);
  if (!kernel.ok() && !args.Has("kernel_size")) return kernel.status();  // missing
  if (!kernel.ok()) return args.Wrong("kernel_size", kernel_expected);
  for (const int64_t k : *kernel) {
    if (k < 1 || k % 2 == 0 || k > kMaxGaussianKernel) {
      return args.Wrong("kernel_size", kernel_expected);
    }
  }
  std::array<double, 2> sigma = {0.1, 2.0};
  if (args.Has("sigma")) {
    const char* sigma_expected = "a number > 0 or a pair (min, max) with 0 < min <= max";
    absl::StatusOr<std::vector<double>> s = args.Numbers("sigma");
    if (!s.ok() || s->size() > 2) return args.Wrong("sigma", sigma_expected);
    sigma = {s->front(), s->back()};
    if (!(0 < sigma[0] && sigma[0] <= sigma[1] && std::isfinite(sigma[1]))) {
      return args.Wrong("sigma", sigma_expected);
    }
  }
  return std::unique_ptr<Transform>(
      new GaussianBlur(static_cast<int>(kernel->front()), static_cast<int>(kernel->back()), sigma));
}

std::string GaussianBlur::Identity() const {
  return absl::StrCat(kName, "(kernel_size=[", kx_, ", ", ky_, "], sigma=[",
                      FormatDouble(sigma_[0]), ", ", FormatDouble(sigma_[1]), "])");
}

absl::StatusOr<SampleSpec> GaussianBlur::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (in.dtype != ElementType::kU8 && in.dtype != ElementType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(kName, ": expected u8 or f32 samples, got ",
                                                   SampleSpecString(in),
                                                   "; put ToDtype(float32) before it"));
  }
  // A bound (sizes that vary) is checked per sample, when each one's size is known.
  if (in.fixed() && (in.height <= uint32_t(ky_ / 2) || in.width <= uint32_t(kx_ / 2))) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": a ", in.height, "x", in.width, " image is too small for kernel_size [", kx_, ", ",
        ky_, "]: reflect padding needs a height over ", ky_ / 2, " and a width over ", kx_ / 2));
  }
  return in;
}

float GaussianBlur::Draw(SampleRandom& rng) const {
  return static_cast<float>(sigma_[0] + (sigma_[1] - sigma_[0]) * rng.UniformDouble());
}

std::string GaussianBlur::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return absl::StrCat("{\"sigma\": ", FormatFloat(Draw(rng)), "}");
}

size_t GaussianBlur::ScratchBytes(const SampleSpec& bound) const {
  return transforms_internal::GaussianBlurScratchBytes(bound.plane_values(), bound.width, kx_);
}

void GaussianBlur::ApplyWithScratch(const SampleSpec& in, const void* src, void* dst,
                                    SampleRandom& rng, void* scratch) const {
  const float sigma = Draw(rng);
  float wx[kMaxGaussianKernel], wy[kMaxGaussianKernel];
  transforms_internal::GaussianKernel1d(kx_, sigma, wx);
  transforms_internal::GaussianKernel1d(ky_, sigma, wy);
  transforms_internal::GaussianBlurChw(in, src, dst, wx, kx_, wy, ky_, scratch);
}

void GaussianBlur::Apply(const SampleSpec& in, const void* src, void* dst,
                         SampleRandom& rng) const {
  // 64-byte aligned: whole cache lines of floats.
  std::vector<float> scratch(ScratchBytes(in) / sizeof(float) + 16);
  const uintptr_t at = reinterpret_cast<uintptr_t>(scratch.data());
  ApplyWithScratch(in, src, dst, rng, reinterpret_cast<void*>((at + 63) & ~uintptr_t{63}));
}

absl::StatusOr<SampleSpec> GaussianBlur::ApplyVariable(const SampleSpec& in,
                                                       const SampleBuffers& io,
                                                       SampleRandom& rng) const {
  ASSIGN_OR_RETURN(const SampleSpec out, OutputSpec(in));
  if (out.bytes() > io.dst_capacity) {
    return absl::DataLossError(absl::StrCat("output ", SampleSpecString(out), " is ", out.bytes(),
                                            " bytes, more than the chain's bound of ",
                                            io.dst_capacity, " bytes for it"));
  }
  ApplyWithScratch(in, io.src, io.dst, rng, io.op_scratch);
  return out;
}

}  // namespace sluice
