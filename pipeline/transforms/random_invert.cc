#include "pipeline/transforms/random_invert.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/pixel_ops.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomInvert::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<Transform>(new RandomInvert(p));
}

std::string RandomInvert::Identity() const {
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ")");
}

absl::StatusOr<SampleSpec> RandomInvert::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckPixelOpInput(kName, in, /*f32_too=*/true,
                                                         /*pil=*/false));
  return in;
}

std::string RandomInvert::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Draw(rng) ? "{\"applied\": true}" : "{\"applied\": false}";
}

void RandomInvert::Apply(const SampleSpec& in, const void* src, void* dst,
                         SampleRandom& rng) const {
  std::memcpy(dst, src, in.bytes());
  if (Draw(rng)) transforms_internal::TensorInvert(in, dst);
}

}  // namespace sluice
