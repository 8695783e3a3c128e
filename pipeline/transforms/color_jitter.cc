#include "pipeline/transforms/color_jitter.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/color.h"
#include "pipeline/transforms/internal/luma.h"

namespace sluice {
namespace {
constexpr const char* kFactorNames[] = {"brightness", "contrast", "saturation", "hue"};

// torchvision's _check_input: a number v (v >= 0) is [center - v, center + v], the low end
// clipped at 0 unless it is hue; a pair must lie within the bounds, lo <= hi; a range that is
// the centre alone, or 0 / None, leaves the adjustment out.
absl::StatusOr<ColorJitter::Range> RangeArg(const TransformArgs& args, const char* name) {
  const bool hue = std::strcmp(name, "hue") == 0;
  const double center = hue ? 0.0 : 1.0;
  const double lo_bound = hue ? -0.5 : 0.0;
  const double hi_bound = hue ? 0.5 : std::numeric_limits<double>::infinity();
  const char* expected =
      hue ? "a number in [0, 0.5], a pair (lo, hi) with -0.5 <= lo <= hi <= 0.5, or None"
          : "a non-negative number, a pair (lo, hi) with 0 <= lo <= hi, or None";
  if (!args.Has(name)) return ColorJitter::Range();
  absl::StatusOr<std::optional<double>> one = args.NumberOrNone(name, std::nullopt);
  std::array<double, 2> range;
  if (one.ok()) {
    if (!one->has_value()) return ColorJitter::Range();
    const double v = **one;
    if (!(v >= 0) || !std::isfinite(v) || (hue && v > 0.5)) return args.Wrong(name, expected);
    range = {center - v, center + v};
    if (!hue) range[0] = std::max(range[0], 0.0);
  } else {
    absl::StatusOr<std::vector<double>> pair = args.Numbers(name);
    if (!pair.ok() || pair->size() != 2) return args.Wrong(name, expected);
    range = {(*pair)[0], (*pair)[1]};
    if (!(lo_bound <= range[0] && range[0] <= range[1] && range[1] <= hi_bound) ||
        !std::isfinite(range[1])) {
      return args.Wrong(name, expected);
    }
  }
  if (range[0] == center && range[1] == center) return ColorJitter::Range();
  return ColorJitter::Range(range);
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> ColorJitter::FromArgs(const TransformArgs& args) {
  std::array<Range, 4> ranges;
  for (int k = 0; k < 4; ++k) {
    ASSIGN_OR_RETURN(ranges[k], RangeArg(args, kFactorNames[k]));
  }
  ASSIGN_OR_RETURN(const bool pil, args.Bool("pil", false));
  return std::unique_ptr<Transform>(new ColorJitter(ranges, pil));
}

std::string ColorJitter::Identity() const {
  std::string out = absl::StrCat(kName, "(");
  for (int k = 0; k < 4; ++k) {
    absl::StrAppend(&out, kFactorNames[k], "=");
    if (ranges_[k]) {
      absl::StrAppend(&out, "[", FormatDouble((*ranges_[k])[0]), ", ",
                      FormatDouble((*ranges_[k])[1]), "], ");
    } else {
      absl::StrAppend(&out, "None, ");
    }
  }
  absl::StrAppend(&out, "pil=", pil_ ? "True" : "False", ")");
  return out;
}

absl::StatusOr<SampleSpec> ColorJitter::OutputSpec(const SampleSpec& in) const {
  // The checks are Grayscale's: 1 or 3 channels, u8 or f32, and u8 for PIL's arithmetic.
  RETURN_IF_ERROR(transforms_internal::CheckGreyInput(kName, in, pil_));
  return in;
}

ColorJitter::Params ColorJitter::Draw(SampleRandom& rng) const {
  Params p;
  p.order = {0, 1, 2, 3};
  for (int k = 3; k > 0; --k) {  // Fisher-Yates: a uniform permutation
    std::swap(p.order[k], p.order[rng.UniformInt(0, k)]);
  }
  for (int k = 0; k < 4; ++k) {
    if (!ranges_[k]) continue;
    const auto [lo, hi] = *ranges_[k];
    p.factors[k] = static_cast<float>(lo + (hi - lo) * rng.UniformDouble());
  }
  return p;
}

std::string ColorJitter::Draws(const SampleSpec& in, SampleRandom& rng) const {
  const Params p = Draw(rng);
  std::string out = absl::StrCat("{\"order\": [", p.order[0], ", ", p.order[1], ", ", p.order[2],
                                 ", ", p.order[3], "]");
  for (int k = 0; k < 4; ++k) {
    absl::StrAppend(&out, ", \"", kFactorNames[k],
                    "\": ", p.factors[k] ? FormatDouble(*p.factors[k]) : "null");
  }
  return out + "}";
}

void ColorJitter::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const {
  const Params p = Draw(rng);
  std::memcpy(dst, src, in.bytes());
  using Adjust = void (*)(const SampleSpec&, void*, float);
  static constexpr Adjust kTensor[] = {
      transforms_internal::TensorBrightness, transforms_internal::TensorContrast,
      transforms_internal::TensorSaturation, transforms_internal::TensorHue};
  static constexpr Adjust kPil[] = {
      transforms_internal::PilBrightness, transforms_internal::PilContrast,
      transforms_internal::PilSaturation, transforms_internal::PilHue};
  for (const int k : p.order) {
    if (p.factors[k]) (pil_ ? kPil : kTensor)[k](in, dst, *p.factors[k]);
  }
}

}  // namespace sluice
