// The verdict reconciled with the what-if table (--what-if=all): the table is an experiment,
// the attribution an inference, so where they disagree the table wins. The stage whose
// freeing gave the largest measured speedup becomes the limiting stage, the class follows it
// (compute-bound for compute, input-bound for a pipeline stage unless the verdict already
// blamed the input), the advice is that stage's, and the sentence says that the measurement
// decided it, with both speedups ("within 15%" when they are that close). Rows with a note or
// no rate are not measurements; "transforms" and "decode" are parts of preprocess that never
// decide the stage by themselves.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/decide/internal/verdicts.h"
#include "report/decide/thresholds.h"
#include "report/stages.h"

namespace sluice::decide_internal {
namespace {

using verdict_thresholds::kCloseCallFraction;

// The stage a measured row freed, when it may decide the verdict's stage; nullopt for the
// normal run, a row not run, and the chain alone (a part of preprocess).
std::optional<Stage> FreedStage(const WhatIfRow& r) {
  if (!r.note.empty() || r.speedup <= 0 || r.free_stage == Stage::kTransforms) return std::nullopt;
  return r.free_stage;
}

// The measured row of `stage`, or null.
const WhatIfRow* RowOf(const std::vector<WhatIfRow>& rows, Stage stage) {
  for (const WhatIfRow& r : rows) {
    if (FreedStage(r) == stage) return &r;
  }
  return nullptr;
}

// The measured row with the largest speedup, or null.
const WhatIfRow* FastestRow(const std::vector<WhatIfRow>& rows) {
  const WhatIfRow* best = nullptr;
  for (const WhatIfRow& r : rows) {
    if (!FreedStage(r)) continue;
    if (best == nullptr || r.speedup > best->speedup) best = &r;
  }
  return best;
}

}  // namespace

Verdict WhatIfVerdict(Verdict inferred, const std::vector<WhatIfRow>& rows,
                      const BottleneckReport& a, const RunRecord* run) {
  const WhatIfRow* best = FastestRow(rows);
  if (best == nullptr || inferred.verdict == VerdictClass::kNoData) return inferred;
  const Stage measured = *FreedStage(*best);
  const Stage attributed = inferred.limiting_stage;
  if (measured == attributed) return inferred;
  // A part of a stage (decode inside preprocess): freeing the whole frees the part too, so the
  // measurement confirms an attribution to the part.
  if (PartOf(attributed) == measured) return inferred;
  std::string named = absl::StrCat("the attribution named ", StageName(attributed));
  if (const WhatIfRow* own = RowOf(rows, attributed); own != nullptr) {
    absl::StrAppendFormat(&named, ", whose freeing gave %.2fx", own->speedup);
    if (best->speedup - own->speedup <= kCloseCallFraction * best->speedup) {
      absl::StrAppendFormat(&named, "; %s or %s: within %.0f%%", StageName(measured),
                            StageName(attributed), 100 * kCloseCallFraction);
    }
  }
  Verdict v;
  v.verdict = inferred.verdict;
  if (measured == Stage::kCompute) {
    v.verdict = VerdictClass::kComputeBound;
  } else if (v.verdict == VerdictClass::kComputeBound || v.verdict == VerdictClass::kLaunchBound) {
    v.verdict = VerdictClass::kInputBound;
  }
  v.limiting_stage = measured;
  std::string advice = Suggest(a.row(measured), a, run, &v).text;
  if (!advice.empty()) advice = absl::StrCat("; ", advice);
  v.sentence = absl::StrFormat(
      "%s: decided by the what-if measurement: freeing %s gave %.2fx, the most of any stage "
      "(%s)%s; the attribution alone said: %s",
      VerdictClassName(v.verdict), StageName(measured), best->speedup, named, advice,
      inferred.sentence);
  return v;
}

}  // namespace sluice::decide_internal
