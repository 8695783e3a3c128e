// The phrases the verdicts share (internal/verdicts.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/decide/internal/verdicts.h"
#include "report/decide/thresholds.h"
#include "report/format.h"
#include "report/stages.h"

namespace sluice::decide_internal {

using verdict_thresholds::kCloseCallFraction;

std::string Waited(double wait_pct) {
  return absl::StrFormat("compute waited %.0f%% of training time", wait_pct);
}

std::string StageRunsAt(const StageRow& r, absl::string_view lead) {
  std::string s =
      absl::StrCat(StageName(r.stage), lead, FormatRate(r.capacity_samples_per_s.value_or(0)));
  const ReportStageInfo* info = FindReportStage(r.stage);
  if (info != nullptr && info->track == TraceTrack::kCopyStream) {
    absl::StrAppend(&s, " on the copy stream");
  } else {
    absl::StrAppend(&s, " on ", r.concurrency, r.concurrency == 1 ? " thread" : " threads");
    if (r.cpu_work) absl::StrAppendFormat(&s, " (%.1f cores busy)", r.cores_busy);
  }
  if (r.pct_of_ceiling) absl::StrAppendFormat(&s, " (%.0f%% of its ceiling)", *r.pct_of_ceiling);
  return s;
}

std::string StageAt(const StageRow& r) { return StageRunsAt(r, " is the limit at "); }

std::string CloseCall(const BottleneckReport& a) {
  const Prediction& p = a.model;
  for (const Bound& b : p.close) {
    if (b.stage == p.binding.stage) continue;  // the same stage through another resource
    return absl::StrFormat(
        "close call: %s (%s) or %s (%s), within %.0f%% of each other by the resource model; ",
        StageName(p.binding.stage), FormatRate(p.binding.samples_per_s), StageName(b.stage),
        FormatRate(b.samples_per_s), 100 * kCloseCallFraction);
  }
  return "";
}

std::string Suggest(const StageRow& r, const BottleneckReport& a, const RunRecord* run,
                    Verdict* v) {
  if (run == nullptr) return "";
  const std::vector<Advice> advice =
      AdviceFor(r.stage, r.concurrency, a.cores, *run, a.on_device, a.is_cuda);
  std::string text;
  for (const Advice& x : advice) {
    absl::StrAppend(&text, text.empty() ? "use " : " or ", AdviceText(x, a.consumer), " (", x.why,
                    ")");
    v->advice.push_back(x);
  }
  return text;
}

}  // namespace sluice::decide_internal
