// The verdicts Decide (decide.h) composes, one file each: a sluice run's (run_verdict.cc),
// a probed loader's (probe_verdict.cc), a data-parallel job's (world_verdict.cc) and the
// what-if table's reconciliation (what_if_verdict.cc); and the phrases they share
// (phrases.cc). Private to report/decide/.
#ifndef SLUICE_REPORT_DECIDE_INTERNAL_VERDICTS_H_
#define SLUICE_REPORT_DECIDE_INTERNAL_VERDICTS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "report/decide/decide.h"

namespace sluice::decide_internal {

// A sluice run's verdict from its rows (`run` may be null: no advice).
Verdict RunVerdict(const BottleneckReport& a, const RunRecord* run);
// A probed loader's verdict from its two rows and the probe's figures.
Verdict ProbeVerdict(const BottleneckReport& a, const ProbeFigures& f);
// Rank 0's verdict `own` made the job's: communication-bound, the straggler's, or `own` with
// the straggler named. Needs a.exchange.
Verdict WorldVerdict(Verdict own, const BottleneckReport& a);
// `inferred` reconciled with the measured what-if rows: the table wins where they disagree.
Verdict WhatIfVerdict(Verdict inferred, const std::vector<WhatIfRow>& rows,
                      const BottleneckReport& a, const RunRecord* run);

// Phrases (phrases.cc).
// "compute waited 35% of training time".
std::string Waited(double wait_pct);
// "<stage><lead>1.2 k samples/s on 2 threads (1.1 cores busy) (80% of its ceiling)".
std::string StageRunsAt(const StageRow& r, absl::string_view lead);
// StageRunsAt(r, " is the limit at ").
std::string StageAt(const StageRow& r);
// "close call: X (a) or Y (b), within 15% of each other by the resource model; " when the
// model holds another stage's bound that close to the binding one, else "".
std::string CloseCall(const BottleneckReport& a);
// The advice that relieves `r`, priced by the resource model (report/advice/price.h): each
// change it predicts at kMinAdvisedSpeedup or more is appended to v->advice and phrased
// "use A (why; the model predicts 1.80x) or B (...)". `declined`: the changes priced lower (or
// not priced), "--preprocess-threads=4 1.00x"; then `text` says that no setting helps and
// lists them. Both empty when `run` is null or nothing applies.
struct Suggestion {
  std::string text;
  std::string declined;
  bool data_change = false;  // a change to the data was advised
};
Suggestion Suggest(const StageRow& r, const BottleneckReport& a, const RunRecord* run, Verdict* v);

}  // namespace sluice::decide_internal

#endif  // SLUICE_REPORT_DECIDE_INTERNAL_VERDICTS_H_
