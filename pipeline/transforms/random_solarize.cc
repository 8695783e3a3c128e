#include "pipeline/transforms/random_solarize.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/pixel_ops.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomSolarize::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double threshold, args.Number("threshold", std::nullopt));
  // torch compares a u8 image with an int threshold in uint8 (a negative one wraps: -3 is 253)
  // and with a float one in float32 (-3.0 inverts every value): a negative one is refused.
  if (!(threshold >= 0.0 && std::isfinite(threshold))) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where("threshold"),
                     ": expected a non-negative number (RandomInvert inverts every value), got ",
                     FormatDouble(threshold)));
  }
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<Transform>(new RandomSolarize(threshold, p));
}

std::string RandomSolarize::Identity() const {
  return absl::StrCat(kName, "(threshold=", FormatDouble(threshold_), ", p=", FormatDouble(p_),
                      ")");
}

absl::StatusOr<SampleSpec> RandomSolarize::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckPixelOpInput(kName, in, /*f32_too=*/true,
                                                         /*pil=*/false));
  const bool u8 = in.dtype == ElementType::kU8;
  if (threshold_ > (u8 ? 255.0 : 1.0)) {  // torchvision's _assert_threshold
    return absl::InvalidArgumentError(
        absl::StrCat(kName, ": expected a threshold of at most ", u8 ? "255 for u8" : "1 for f32",
                     " samples (their bound), got threshold=", FormatDouble(threshold_), " for ",
                     SampleSpecString(in)));
  }
  return in;
}

std::string RandomSolarize::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Draw(rng) ? "{\"applied\": true}" : "{\"applied\": false}";
}

void RandomSolarize::Apply(const SampleSpec& in, const void* src, void* dst,
                           SampleRandom& rng) const {
  std::memcpy(dst, src, in.bytes());
  if (Draw(rng)) transforms_internal::TensorSolarize(in, dst, threshold_);
}

}  // namespace sluice
