#include "pipeline/transforms/random_grayscale.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/luma.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomGrayscale::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.1));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  ASSIGN_OR_RETURN(const bool pil, args.Bool("pil", false));
  return std::unique_ptr<Transform>(new RandomGrayscale(p, pil));
}

std::string RandomGrayscale::Identity() const {
  return absl::StrCat(kName, "(p=", FormatDouble(p_), ", pil=", pil_ ? "True" : "False", ")");
}

absl::StatusOr<SampleSpec> RandomGrayscale::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckGreyInput(kName, in, pil_));
  return in;
}

std::string RandomGrayscale::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return rng.UniformDouble() < p_ ? "{\"grey\": true}" : "{\"grey\": false}";
}

void RandomGrayscale::Apply(const SampleSpec& in, const void* src, void* dst,
                            SampleRandom& rng) const {
  if (!(rng.UniformDouble() < p_)) {
    std::memcpy(dst, src, in.bytes());
    return;
  }
  transforms_internal::ToGrey(in, src, dst, in.channels,
                              pil_);  // torchvision: as many channels as the input
}

}  // namespace sluice
