#include "pipeline/transforms/random_adjust_sharpness.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/pixel_ops.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomAdjustSharpness::FromArgs(
    const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double factor, args.Number("sharpness_factor", std::nullopt));
  // Both libraries blend in float32, where a factor past 1e30 overflows (NaN pixels).
  if (!(factor >= 0.0 && factor <= 1e30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where("sharpness_factor"),
                     ": expected a non-negative number, at most 1e30 (the float32 blend "
                     "overflows beyond), got ",
                     FormatDouble(factor)));
  }
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  ASSIGN_OR_RETURN(const bool pil, args.Bool("pil", false));
  return std::unique_ptr<Transform>(new RandomAdjustSharpness(factor, p, pil));
}

std::string RandomAdjustSharpness::Identity() const {
  return absl::StrCat(kName, "(sharpness_factor=", FormatDouble(factor_), ", p=", FormatDouble(p_),
                      ", pil=", pil_ ? "True" : "False", ")");
}

absl::StatusOr<SampleSpec> RandomAdjustSharpness::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckPixelOpInput(kName, in, /*f32_too=*/true, pil_));
  return in;
}

std::string RandomAdjustSharpness::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Draw(rng) ? "{\"applied\": true}" : "{\"applied\": false}";
}

void RandomAdjustSharpness::Apply(const SampleSpec& in, const void* src, void* dst,
                                  SampleRandom& rng) const {
  if (!Draw(rng)) {
    std::memcpy(dst, src, in.bytes());
  } else if (pil_) {
    transforms_internal::PilSharpness(in, src, dst, factor_);
  } else {
    transforms_internal::TensorSharpness(in, src, dst, factor_);
  }
}

}  // namespace sluice
