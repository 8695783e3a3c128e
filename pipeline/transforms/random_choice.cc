#include "pipeline/transforms/random_choice.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {

RandomChoice::RandomChoice(transforms_internal::OpList ops,
                           std::optional<std::vector<double>> weights)
    : ops_(std::move(ops)), weights_(std::move(weights)) {
  double sum = 0;
  for (size_t i = 0; i < ops_.size(); ++i) {
    sum += weights_ ? (*weights_)[i] : 1.0;
    cumulative_.push_back(sum);
  }
}

absl::StatusOr<std::unique_ptr<Transform>> RandomChoice::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(transforms_internal::OpList ops, args.Ops("transforms"));
  std::optional<std::vector<double>> weights;
  absl::StatusOr<std::optional<double>> none = args.NumberOrNone("p", std::nullopt);
  if (args.Has("p") && !(none.ok() && !none->has_value())) {
    absl::StatusOr<std::vector<double>> p = args.Numbers("p");
    const std::string expected =
        absl::StrCat("None or ", ops.size(), " non-negative weights, one per transform, not all 0");
    if (!p.ok() || p->size() != ops.size()) return args.Wrong("p", expected);
    double sum = 0;
    for (const double w : *p) {
      if (!(w >= 0) || !std::isfinite(w)) return args.Wrong("p", expected);
      sum += w;
    }
    if (!(sum > 0) || !std::isfinite(sum)) return args.Wrong("p", expected);
    weights = std::move(*p);
  }
  return std::unique_ptr<Transform>(new RandomChoice(std::move(ops), std::move(weights)));
}

std::string RandomChoice::Identity() const {
  std::string p = "None";
  if (weights_) {
    p = "[";
    for (size_t i = 0; i < weights_->size(); ++i) {
      absl::StrAppend(&p, i > 0 ? ", " : "", FormatDouble((*weights_)[i]));
    }
    p += "]";
  }
  return absl::StrCat(kName, "(transforms=", transforms_internal::OpListIdentity(ops_), ", p=", p,
                      ")");
}

absl::StatusOr<SampleSpec> RandomChoice::OutputSpec(const SampleSpec& in) const {
  std::optional<SampleSpec> first;
  for (const auto& op : ops_) {
    ASSIGN_OR_RETURN(const SampleSpec out,
                     transforms_internal::SequenceOutputSpec(kName, {op}, in));
    if (!first) {
      first = out;
    } else if (!transforms_internal::SameSamples(*first, out)) {
      return absl::InvalidArgumentError(absl::StrCat(
          kName, ": ", ops_.front()->Identity(), " makes ", SampleSpecString(*first), " but ",
          op->Identity(), " makes ", SampleSpecString(out),
          "; every choice must make samples of one type and size (a batch holds one shape)"));
    }
  }
  return *first;
}

size_t RandomChoice::ScratchBytes(const SampleSpec& in) const {
  size_t most = 0;
  for (const auto& op : ops_) most = std::max(most, op->ScratchBytes(in));
  return most;
}

size_t RandomChoice::Choose(SampleRandom& rng) const {
  const double u = rng.UniformDouble() * cumulative_.back();
  const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
  // u < the total, so some running sum exceeds it; a zero weight's op is never chosen.
  return std::min<size_t>(it - cumulative_.begin(), ops_.size() - 1);
}

void RandomChoice::ApplyWithScratch(const SampleSpec& in, const void* src, void* dst,
                                    SampleRandom& rng, void* scratch) const {
  ops_[Choose(rng)]->ApplyWithScratch(in, src, dst, rng, scratch);
}

void RandomChoice::Apply(const SampleSpec& in, const void* src, void* dst,
                         SampleRandom& rng) const {
  transforms_internal::WithOwnScratch(
      ScratchBytes(in), [&](void* scratch) { ApplyWithScratch(in, src, dst, rng, scratch); });
}

std::string RandomChoice::Draws(const SampleSpec& in, SampleRandom& rng) const {
  const size_t k = Choose(rng);
  return absl::StrCat("{\"choice\": ", k, ", \"op\": ", ops_[k]->Draws(in, rng), "}");
}

}  // namespace sluice
