#include "pipeline/transforms/random_apply.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Transform>> RandomApply::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(transforms_internal::OpList ops, args.Ops("transforms"));
  ASSIGN_OR_RETURN(const double p, args.Number("p", 0.5));
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("p"), ": expected a probability p in [0, 1], got ", FormatDouble(p)));
  }
  return std::unique_ptr<Transform>(new RandomApply(std::move(ops), p));
}

std::string RandomApply::Identity() const {
  return absl::StrCat(kName, "(transforms=", transforms_internal::OpListIdentity(ops_),
                      ", p=", FormatDouble(p_), ")");
}

absl::StatusOr<SampleSpec> RandomApply::OutputSpec(const SampleSpec& in) const {
  ASSIGN_OR_RETURN(const SampleSpec out, transforms_internal::SequenceOutputSpec(kName, ops_, in));
  if (!transforms_internal::SameSamples(in, out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": its transforms turn ", SampleSpecString(in), " into ", SampleSpecString(out),
        "; a skipped RandomApply leaves the sample as it is, so they must keep its type and "
        "size (put ops that resize or cast outside it)"));
  }
  return in;
}

size_t RandomApply::ScratchBytes(const SampleSpec& in) const {
  return transforms_internal::SequenceScratchBytes(ops_, in);
}

void RandomApply::ApplyWithScratch(const SampleSpec& in, const void* src, void* dst,
                                   SampleRandom& rng, void* scratch) const {
  if (!(rng.UniformDouble() < p_)) {
    std::memcpy(dst, src, in.bytes());
    return;
  }
  transforms_internal::ApplySequence(ops_, in, src, dst, rng, scratch);
}

void RandomApply::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const {
  transforms_internal::WithOwnScratch(
      ScratchBytes(in), [&](void* scratch) { ApplyWithScratch(in, src, dst, rng, scratch); });
}

std::string RandomApply::Draws(const SampleSpec& in, SampleRandom& rng) const {
  if (!(rng.UniformDouble() < p_)) return "{\"applied\": false}";
  return absl::StrCat(
      "{\"applied\": true, \"ops\": ", transforms_internal::SequenceDraws(ops_, in, rng), "}");
}

}  // namespace sluice
