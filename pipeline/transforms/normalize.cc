#include "pipeline/transforms/normalize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {
namespace {
std::string ListText(const std::vector<float>& v) {
  return absl::StrCat(
      "[", absl::StrJoin(v, ", ", [](std::string* out, float x) { out->append(FormatFloat(x)); }),
      "]");
}

// torchvision converts mean and std to float32 tensors: round each double once.
std::vector<float> ToFloats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// A value float32 cannot hold would reach Create's message after the conversion, as "inf" or
// "0", not as the user gave it: refused here, naming the value as given (ExactNumber). Beyond
// float32's range (half an ulp past FLT_MAX, where rounding gives infinity) for either; a
// non-zero std that rounds to 0 (it divides). A mean that rounds to 0 is the same mean.
absl::Status CheckFloat32(const TransformArgs& args, absl::string_view name,
                          const std::vector<double>& values, bool divides) {
  constexpr double kFloat32Overflow = static_cast<double>(FLT_MAX) + 0x1p103;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    const std::string value =
        absl::StrCat(ExactNumber(v), values.size() > 1 ? absl::StrCat(" (channel ", i, ")") : "");
    if (std::isfinite(v) && std::fabs(v) >= kFloat32Overflow) {
      return absl::InvalidArgumentError(absl::StrCat(
          args.Where(name), ": ", value,
          " is outside float32's range (magnitudes up to about 3.4e+38); mean and std are "
          "float32, as torchvision's"));
    }
    if (divides && v != 0 && static_cast<float>(v) == 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.Where(name), ": ", value,
                       " rounds to 0 in float32 (the smallest positive float32 is about "
                       "1.4e-45); the std divides, so it must be non-zero in float32"));
    }
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> Normalize::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const std::vector<double> mean, args.Numbers("mean"));
  ASSIGN_OR_RETURN(const std::vector<double> std, args.Numbers("std"));
  RETURN_IF_ERROR(CheckFloat32(args, "mean", mean, /*divides=*/false));
  RETURN_IF_ERROR(CheckFloat32(args, "std", std, /*divides=*/true));
  absl::StatusOr<std::unique_ptr<Normalize>> op = Create(ToFloats(mean), ToFloats(std));
  if (!op.ok()) return op.status();
  return std::unique_ptr<Transform>(std::move(*op));
}

absl::StatusOr<std::unique_ptr<Normalize>> Normalize::Create(std::vector<float> mean,
                                                             std::vector<float> std) {
  const size_t n = std::max(mean.size(), std.size());
  if (mean.empty() || std.empty() || (mean.size() != n && mean.size() != 1) ||
      (std.size() != n && std.size() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Normalize: expected mean and std of one value per channel (or one for all), got mean ",
        ListText(mean), " and std ", ListText(std)));
  }
  for (size_t c = 0; c < n; ++c) {
    const float m = mean[mean.size() == 1 ? 0 : c], s = std[std.size() == 1 ? 0 : c];
    if (!std::isfinite(m) || !std::isfinite(s) || s == 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("Normalize: expected finite means and finite, non-zero stds, got mean ",
                       ListText(mean), " and std ", ListText(std)));
    }
  }
  std::unique_ptr<Normalize> op(new Normalize());
  for (size_t c = 0; c < n; ++c) {
    const Normalization norm{{mean[mean.size() == 1 ? 0 : c]}, {std[std.size() == 1 ? 0 : c]}};
    // One value per converted "sample": Apply converts a plane as plane_values() samples.
    ASSIGN_OR_RETURN(SampleConverter u8,
                     SampleConverter::Create(SampleDType::kU8, H2DFormat::kF32, norm, 1));
    ASSIGN_OR_RETURN(SampleConverter f32,
                     SampleConverter::Create(SampleDType::kF32, H2DFormat::kF32, norm, 1));
    op->from_u8_.push_back(u8);
    op->from_f32_.push_back(f32);
  }
  op->mean_ = std::move(mean);
  op->std_ = std::move(std);
  return op;
}

std::string Normalize::Identity() const {
  return absl::StrCat(kName, "(mean=", ListText(mean_), ", std=", ListText(std_), ")");
}

absl::StatusOr<SampleSpec> Normalize::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (in.dtype != ElementType::kU8 && in.dtype != ElementType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Normalize: expected u8 or f32 samples, got ", SampleSpecString(in),
                     " (ToDtype(f32) before Normalize converts them)"));
  }
  if (from_u8_.size() != 1 && from_u8_.size() != in.channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Normalize: mean ", ListText(mean_), " and std ", ListText(std_), " have ", from_u8_.size(),
        " values; expected one per channel (", in.channels, ") or one for all"));
  }
  if (in.dtype == ElementType::kU8) RETURN_IF_ERROR(CheckToTensorScale());
  SampleSpec out = in;
  out.dtype = ElementType::kF32;
  return out;
}

// On u8 samples the statistics apply to x/255 (ToTensor's scale), as --normalize-mean/std's do,
// with the same ranges: ImageNet's or CIFAR's statistics on the 0-255 scale (mean 125.3) are a
// common slip that would otherwise train silently on values near -500.
absl::Status Normalize::CheckToTensorScale() const {
  for (size_t c = 0; c < mean_.size(); ++c) {
    if (mean_[c] < -10 || mean_[c] > 10) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Normalize: on u8 samples the mean applies to x/255 (ToTensor's scale), so it must be "
          "in [-10, 10]; got ",
          mean_[c], " (channel ", c, "): give statistics on the 0-1 scale (", mean_[c],
          "/255 = ", mean_[c] / 255, ")"));
    }
  }
  for (size_t c = 0; c < std_.size(); ++c) {
    if (std_[c] < 1e-6 || std_[c] > 1e3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Normalize: on u8 samples the std applies to x/255 (ToTensor's scale), so it must be "
          "in [1e-06, 1000]; got ",
          std_[c], " (channel ", c, ")"));
    }
  }
  return absl::OkStatus();
}

void Normalize::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom&) const {
  const std::vector<SampleConverter>& convs = in.dtype == ElementType::kU8 ? from_u8_ : from_f32_;
  const size_t plane = in.plane_values();
  const size_t in_plane_bytes = plane * ElementSize(in.dtype);
  for (uint32_t c = 0; c < in.channels; ++c) {
    const SampleConverter& conv = convs[convs.size() == 1 ? 0 : c];
    conv.Convert(static_cast<const char*>(src) + c * in_plane_bytes,
                 static_cast<float*>(dst) + c * plane, plane);
  }
}

}  // namespace sluice
