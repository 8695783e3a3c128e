// A data-parallel job's verdict, on rank 0 (docs/bottleneck.md, "Data-parallel runs"):
// communication-bound when the straggler's own exchange time passes kCommunicationBoundPct of
// its training time, else the straggler's verdict when the others wait for it, else rank 0's
// own verdict with the straggler named.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/decide/internal/verdicts.h"
#include "report/decide/thresholds.h"
#include "report/format.h"

namespace sluice::decide_internal {
namespace {

using namespace verdict_thresholds;  // NOLINT: the thresholds, by their names

std::string Exchanged(const ExchangeFigures& x) {
  if (!x.achieved_gb_per_s) return "";
  return absl::StrFormat(
      " at %.2f GB/s%s", *x.achieved_gb_per_s,
      x.pct_of_ceiling
          ? absl::StrFormat(", %.0f%% of the measured all-reduce ceiling", *x.pct_of_ceiling)
          : "");
}

}  // namespace

Verdict WorldVerdict(Verdict own, const BottleneckReport& a) {
  const ExchangeFigures& x = *a.exchange;
  const int s = x.straggler.rank;
  if (own.verdict != VerdictClass::kNoData && x.pure_pct > kCommunicationBoundPct) {
    Verdict v;
    v.verdict = VerdictClass::kCommunicationBound;
    v.limiting_stage = Stage::kCompute;  // written "exchange" (ToJson)
    v.sentence = absl::StrFormat(
        "communication-bound: the gradient exchange takes %.0f%% of training time even on rank "
        "%d, the straggler, which waits for no one (%d bytes per step%s); give each rank more "
        "samples per step (a larger global --batch-size), run fewer ranks per node, or use NCCL "
        "on GPUs (--device cuda)",
        x.pure_pct, s, x.bytes_per_step, Exchanged(x));
    return v;
  }
  const std::string clause = StragglerClause(x.straggler);
  if (s != 0 && x.straggler.others_wait_pct >= kStragglerWaitPct &&
      s < static_cast<int>(a.ranks.size())) {
    const RankSummary& slow = a.ranks[s];
    if (auto c = ParseVerdictClass(slow.verdict_class)) own.verdict = *c;
    own.limiting_stage = slow.limiting_stage;
    own.sentence = absl::StrCat(VerdictClassName(own.verdict), ": ", clause, "; rank ", s,
                                "'s own report: ", slow.sentence);
    own.advice.clear();  // rank 0's settings do not relieve another rank's limit
    return own;
  }
  absl::StrAppend(&own.sentence, "; ", clause);
  return own;
}

}  // namespace sluice::decide_internal
