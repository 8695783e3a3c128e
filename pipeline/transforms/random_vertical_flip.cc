#include "pipeline/transforms/random_vertical_flip.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomVerticalFlip::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  absl::StatusOr<std::unique_ptr<RandomVerticalFlip>> op = Create(p);
  if (!op.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(args.Where("p"), ": ", op.status().message()));
  }
  return std::unique_ptr<Transform>(std::move(*op));
}

absl::StatusOr<std::unique_ptr<RandomVerticalFlip>> RandomVerticalFlip::Create(double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<RandomVerticalFlip>(new RandomVerticalFlip(p));
}

std::string RandomVerticalFlip::Identity() const {
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ")");
}

absl::StatusOr<SampleSpec> RandomVerticalFlip::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  return in;
}

std::string RandomVerticalFlip::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return rng.UniformDouble() < p_ ? "{\"flip\": true}" : "{\"flip\": false}";
}

void RandomVerticalFlip::Apply(const SampleSpec& in, const void* src, void* dst,
                               SampleRandom& rng) const {
  if (!(rng.UniformDouble() < p_)) {
    std::memcpy(dst, src, in.bytes());
    return;
  }
  // Row y of each channel becomes row height - 1 - y: whole rows, copied as they are.
  const size_t row = size_t{in.width} * ElementSize(in.dtype);
  const char* in_bytes = static_cast<const char*>(src);
  char* out_bytes = static_cast<char*>(dst);
  for (size_t c = 0; c < in.channels; ++c) {
    const size_t plane = c * in.height * row;
    for (size_t y = 0; y < in.height; ++y) {
      std::memcpy(out_bytes + plane + y * row, in_bytes + plane + (in.height - 1 - y) * row, row);
    }
  }
}

}  // namespace sluice
