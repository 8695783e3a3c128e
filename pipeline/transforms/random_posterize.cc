#include "pipeline/transforms/random_posterize.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/pixel_ops.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomPosterize::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const int64_t bits, args.Int("bits", std::nullopt));
  if (bits < 0 || bits > 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("bits"), ": expected the number of bits to keep, in [0, 8], got ", bits));
  }
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<Transform>(new RandomPosterize(static_cast<int>(bits), p));
}

std::string RandomPosterize::Identity() const {
  return absl::StrCat(kName, "(bits=", bits_, ", p=", FormatDouble(p_), ")");
}

absl::StatusOr<SampleSpec> RandomPosterize::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckPixelOpInput(kName, in, /*f32_too=*/false,
                                                         /*pil=*/false));
  return in;
}

std::string RandomPosterize::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return Draw(rng) ? "{\"applied\": true}" : "{\"applied\": false}";
}

void RandomPosterize::Apply(const SampleSpec& in, const void* src, void* dst,
                            SampleRandom& rng) const {
  std::memcpy(dst, src, in.bytes());
  if (Draw(rng)) transforms_internal::TensorPosterize(in, dst, bits_);
}

}  // namespace sluice
