#include "pipeline/transforms/random_erasing.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numbers>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {
namespace {
// `name` as (lo, hi) with min_lo <= lo <= hi (lo > 0 when positive), hi <= max_hi and finite;
// `fallback` when absent.
absl::Status RangeArg(const TransformArgs& args, absl::string_view name, bool positive,
                      double max_hi, const double fallback[2], double out[2]) {
  out[0] = fallback[0];
  out[1] = fallback[1];
  if (!args.Has(name)) return absl::OkStatus();
  const char* expected =
      positive ? "(lo, hi) with 0 < lo <= hi, both finite" : "(lo, hi) with 0 <= lo <= hi <= 1";
  absl::StatusOr<std::vector<double>> v = args.Numbers(name);
  if (!v.ok() || v->size() != 2) return args.Wrong(name, expected);
  const double lo = (*v)[0], hi = (*v)[1];
  if (!(positive ? lo > 0 : lo >= 0) || !(lo <= hi) || !(hi <= max_hi) || !std::isfinite(hi)) {
    return args.Wrong(name, expected);
  }
  out[0] = lo;
  out[1] = hi;
  return absl::OkStatus();
}

// torchvision's value: a number, a list of them (one, or one per channel, checked against the
// input in OutputSpec) or 'random' (an empty list here). torch makes float32 of them
// (torch.tensor(value)); a value float32 cannot hold is refused as given.
absl::StatusOr<std::vector<float>> ValueArg(const TransformArgs& args) {
  constexpr const char* kExpected =
      "a number, a list of numbers (one, or one per channel) or random";
  if (!args.Has("value")) return std::vector<float>{0.0f};
  absl::StatusOr<std::string> name = args.Name("value", std::nullopt);
  if (name.ok()) {
    if (*name == "random") return std::vector<float>();
    return args.Wrong("value", kExpected);
  }
  absl::StatusOr<std::vector<double>> numbers = args.Numbers("value");
  if (!numbers.ok()) return args.Wrong("value", kExpected);
  constexpr double kFloat32Overflow = static_cast<double>(FLT_MAX) + 0x1p103;
  std::vector<float> out;
  for (const double v : *numbers) {
    if (!std::isfinite(v) || std::fabs(v) >= kFloat32Overflow) {
      return args.Wrong("value", "finite numbers within float32's range (as torch's tensor)");
    }
    out.push_back(static_cast<float>(v));
  }
  return out;
}

// Standard normal float32 values from rng by Box-Muller: each pair of uniform draws gives two.
class Normals {
 public:
  explicit Normals(SampleRandom& rng) : rng_(rng) {}
  float Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(1.0 - rng_.UniformDouble()));  // 1 - u in (0, 1]
    const double theta = 2.0 * std::numbers::pi * rng_.UniformDouble();
    spare_ = static_cast<float>(r * std::sin(theta));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(theta));
  }

 private:
  SampleRandom& rng_;
  // A bool and a value, not std::optional: gcc's -O2 -fsanitize=thread build warned that the
  // optional's value may be used uninitialized.
  bool has_spare_ = false;
  float spare_ = 0;
};
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> RandomErasing::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  constexpr double kScale[2] = {0.02, 0.33}, kRatio[2] = {0.3, 3.3};
  double scale[2], ratio[2];
  RETURN_IF_ERROR(RangeArg(args, "scale", /*positive=*/false, 1.0, kScale, scale));
  RETURN_IF_ERROR(RangeArg(args, "ratio", /*positive=*/true, HUGE_VAL, kRatio, ratio));
  ASSIGN_OR_RETURN(std::vector<float> value, ValueArg(args));
  ASSIGN_OR_RETURN(const bool inplace, args.Bool("inplace", false));
  (void)inplace;  // sluice always writes a new buffer
  return std::unique_ptr<Transform>(new RandomErasing(p, scale, ratio, std::move(value)));
}

std::string RandomErasing::Identity() const {
  std::string value;
  if (value_.empty()) {
    value = "random";
  } else if (value_.size() == 1) {
    value = FormatFloat(value_[0]);
  } else {
    value = absl::StrCat(
        "[",
        absl::StrJoin(value_, ", ", [](std::string* out, float v) { out->append(FormatFloat(v)); }),
        "]");
  }
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ", scale=(", FormatDouble(scale_[0]), ", ",
                      FormatDouble(scale_[1]), "), ratio=(", FormatDouble(ratio_[0]), ", ",
                      FormatDouble(ratio_[1]), "), value=", value, ")");
}

absl::StatusOr<SampleSpec> RandomErasing::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (in.dtype != ElementType::kU8 && in.dtype != ElementType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("RandomErasing: expected u8 or f32 samples, got ", SampleSpecString(in),
                     " (put ToDtype(float32) before it)"));
  }
  if (value_.empty()) {
    if (in.dtype == ElementType::kU8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RandomErasing: value=random needs float samples: put it after Normalize (in Python, "
          "after torchvision's ToTensor also does) "
          "(got ",
          SampleSpecString(in), ")"));
    }
    return in;
  }
  if (value_.size() != 1 && value_.size() != in.channels) {
    return absl::InvalidArgumentError(
        absl::StrCat("RandomErasing argument 'value': expected one value, or one per channel (",
                     in.channels, "), got ", value_.size(), " values for ", SampleSpecString(in)));
  }
  if (in.dtype == ElementType::kU8) {
    for (size_t c = 0; c < value_.size(); ++c) {
      if (!(value_[c] >= 0.0f && value_[c] <= 255.0f)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "RandomErasing argument 'value': expected numbers in [0, 255] for u8 samples, got ",
            FormatFloat(value_[c]), value_.size() > 1 ? absl::StrCat(" (channel ", c, ")") : "",
            " for ", SampleSpecString(in)));
      }
    }
  }
  return in;
}

RandomErasing::Params RandomErasing::Draw(const SampleSpec& in, SampleRandom& rng) const {
  Params p;
  if (!(rng.UniformDouble() < p_)) return p;
  const double height = in.height, width = in.width;
  const double area = height * width;
  const double log_lo = std::log(ratio_[0]), log_hi = std::log(ratio_[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * (scale_[0] + (scale_[1] - scale_[0]) * rng.UniformDouble());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.UniformDouble());
    // Python's round(): halves to even (the default rounding mode of nearbyint).
    const double h = std::nearbyint(std::sqrt(erase_area * aspect));
    const double w = std::nearbyint(std::sqrt(erase_area / aspect));
    if (!(h < height && w < width)) continue;  // NaN and infinity fail too
    p.erase = true;
    p.height = static_cast<uint32_t>(h);
    p.width = static_cast<uint32_t>(w);
    p.top = static_cast<uint32_t>(rng.UniformInt(0, in.height - p.height));
    p.left = static_cast<uint32_t>(rng.UniformInt(0, in.width - p.width));
    return p;
  }
  return p;  // torchvision returns the image itself
}

std::string RandomErasing::Draws(const SampleSpec& in, SampleRandom& rng) const {
  const Params p = Draw(in, rng);
  if (!p.erase) return "{\"erase\": false}";
  if (value_.empty()) {  // the normals Apply draws
    Normals normals(rng);
    const size_t n = size_t{in.channels} * p.height * p.width;
    for (size_t i = 0; i < n; ++i) normals.Next();
  }
  return absl::StrCat("{\"erase\": true, \"top\": ", p.top, ", \"left\": ", p.left,
                      ", \"height\": ", p.height, ", \"width\": ", p.width, "}");
}

void RandomErasing::Apply(const SampleSpec& in, const void* src, void* dst,
                          SampleRandom& rng) const {
  std::memcpy(dst, src, in.bytes());
  const Params p = Draw(in, rng);
  if (!p.erase || p.height == 0 || p.width == 0) return;
  const size_t plane = size_t{in.height} * in.width;
  if (value_.empty()) {  // f32 only (OutputSpec)
    Normals normals(rng);
    for (uint32_t c = 0; c < in.channels; ++c) {
      for (uint32_t y = p.top; y < p.top + p.height; ++y) {
        float* row = static_cast<float*>(dst) + c * plane + size_t{y} * in.width + p.left;
        for (uint32_t x = 0; x < p.width; ++x) row[x] = normals.Next();
      }
    }
    return;
  }
  for (uint32_t c = 0; c < in.channels; ++c) {
    const float v = value_[value_.size() == 1 ? 0 : c];
    for (uint32_t y = p.top; y < p.top + p.height; ++y) {
      const size_t start = c * plane + size_t{y} * in.width + p.left;
      if (in.dtype == ElementType::kU8) {
        // torch's assignment of a float32 to uint8 truncates (v in [0, 255]: OutputSpec).
        std::memset(static_cast<uint8_t*>(dst) + start, static_cast<uint8_t>(v), p.width);
      } else {
        std::fill_n(static_cast<float*>(dst) + start, p.width, v);
      }
    }
  }
}

}  // namespace sluice
