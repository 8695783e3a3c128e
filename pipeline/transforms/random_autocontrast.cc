#include "pipeline/transforms/random_autocontrast.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/pixel_ops.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomAutocontrast::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  ASSIGN_OR_RETURN(const bool pil, args.Bool("pil", false));
  return std::unique_ptr<Transform>(new RandomAutocontrast(p, pil));
}

std::string RandomAutocontrast::Identity() const {
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ", pil=", pil_ ? "True" : "False", ")");
}

absl::StatusOr<SampleSpec> RandomAutocontrast::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckPixelOpInput(kName, in, /*f32_too=*/true, pil_));
  return in;
}

std::string RandomAutocontrast::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Draw(rng) ? "{\"applied\": true}" : "{\"applied\": false}";
}

void RandomAutocontrast::Apply(const SampleSpec& in, const void* src, void* dst,
                               SampleRandom& rng) const {
  std::memcpy(dst, src, in.bytes());
  if (!Draw(rng)) return;
  if (pil_) {
    transforms_internal::PilAutocontrast(in, dst);
  } else {
    transforms_internal::TensorAutocontrast(in, dst);
  }
}

}  // namespace sluice
