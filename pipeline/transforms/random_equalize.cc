#include "pipeline/transforms/random_equalize.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/pixel_ops.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomEqualize::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<Transform>(new RandomEqualize(p));
}

std::string RandomEqualize::Identity() const {
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ")");
}

absl::StatusOr<SampleSpec> RandomEqualize::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckPixelOpInput(kName, in, /*f32_too=*/false,
                                                         /*pil=*/false));
  return in;
}

std::string RandomEqualize::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Draw(rng) ? "{\"applied\": true}" : "{\"applied\": false}";
}

void RandomEqualize::Apply(const SampleSpec& in, const void* src, void* dst,
                           SampleRandom& rng) const {
  std::memcpy(dst, src, in.bytes());
  if (Draw(rng)) transforms_internal::TensorEqualize(in, dst);
}

}  // namespace sluice
