// The phrases the verdicts share (internal/verdicts.h).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/advice/price.h"
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
    if (b.constraint == Constraint::kSharedCpu && p.binding.constraint == Constraint::kSharedCpu) {
      return absl::StrFormat(
          "close call: the cores bind (%s), and %s and %s use them within %.0f%% of each "
          "other by the resource model; ",
          FormatRate(p.binding.samples_per_s), StageName(p.binding.stage), StageName(b.stage),
          100 * kCloseCallFraction);
    }
    return absl::StrFormat(
        "close call: %s (%s) or %s (%s), within %.0f%% of each other by the resource model; ",
        StageName(p.binding.stage), FormatRate(p.binding.samples_per_s), StageName(b.stage),
        FormatRate(b.samples_per_s), 100 * kCloseCallFraction);
  }
  return "";
}

namespace {

// "use --preprocess-threads=4 (more batches assembled at once; the model predicts 1.80x)", or
// for a change to the data "store the images at ... (a quarter of the pixels to decode; the
// model predicts 2.10x: a change to the data, which a rerun cannot check: re-ingest and
// measure)".
std::string AdvicePhrase(const Advice& x, Consumer consumer) {
  if (x.setting == AdviceSetting::kImageSide) {
    return absl::StrFormat(
        "%s (%s; the model predicts %.2fx; a change to the data, which a rerun cannot check: "
        "resize the files in their format and quality (decoding's cost follows the pixels and "
        "the bytes), ingest them again and measure, with the machine as busy as in this run)",
        AdviceText(x, consumer), x.why, x.predicted_speedup);
  }
  if (IsDataChange(x.setting)) {
    return absl::StrFormat(
        "%s (%s; the model predicts %.2fx; a change to the data, which a rerun cannot check: "
        "write the dataset again and measure)",
        AdviceText(x, consumer), x.why, x.predicted_speedup);
  }
  return absl::StrFormat("use %s (%s; the model predicts %.2fx)", AdviceText(x, consumer), x.why,
                         x.predicted_speedup);
}

}  // namespace

Suggestion Suggest(const StageRow& r, const BottleneckReport& a, const RunRecord* run, Verdict* v) {
  Suggestion out;
  if (run == nullptr) return out;
  for (Advice x : AdviceFor(r.stage, r.concurrency, a.cores, *run, a.on_device, a.is_cuda)) {
    const std::optional<double> gain =
        a.resource_model ? PredictedSpeedup(x, *a.resource_model, a, *run) : std::nullopt;
    if (!gain || *gain < kMinAdvisedSpeedup) {
      absl::StrAppend(&out.declined, out.declined.empty() ? "" : ", ", AdviceText(x, a.consumer),
                      gain ? absl::StrFormat(" %.2fx", *gain) : std::string(" not priced"));
      continue;
    }
    x.predicted_speedup = *gain;
    absl::StrAppend(&out.text, out.text.empty() ? "" : " or ", AdvicePhrase(x, a.consumer));
    out.data_change = out.data_change || IsDataChange(x.setting);
    v->advice.push_back(std::move(x));
  }
  if (out.text.empty() && !out.declined.empty()) {
    out.text = absl::StrFormat(
        "no setting helps by the resource model (%s; %.1fx at least is "
        "advised)",
        out.declined, kMinAdvisedSpeedup);
  }
  return out;
}

}  // namespace sluice::decide_internal
