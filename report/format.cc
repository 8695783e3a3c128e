#include "report/format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pipeline/stage_stats.h"
#include "report/stages.h"

namespace sluice {

std::string FormatRate(double samples_per_s) {
  if (samples_per_s >= 1e6) return absl::StrFormat("%.2f M samples/s", samples_per_s / 1e6);
  if (samples_per_s >= 1e3) return absl::StrFormat("%.1f k samples/s", samples_per_s / 1e3);
  return absl::StrFormat("%.0f samples/s", samples_per_s);
}

std::string FormatDuration(int64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns < 1000) return absl::StrFormat("%d ns", ns);
  // Three significant figures: 1.23, 12.3, 123 (us or ms).
  const auto three = [](double x, const char* unit) {
    return absl::StrFormat(x < 10 ? "%.2f %s" : x < 100 ? "%.1f %s" : "%.0f %s", x, unit);
  };
  if (ns < 1'000'000) return three(v / 1e3, "us");
  if (ns < 1'000'000'000) return three(v / 1e6, "ms");
  return absl::StrFormat("%.2f s", v / 1e9);
}

std::string FormatItemLatency(const StageRow& r) {
  if (!r.latency_p50_ns || !r.latency_p99_ns || !r.latency_max_ns) return "";
  const StageInfo* info = FindReportStage(r.stage);
  std::string unit = info != nullptr && info->unit != nullptr ? info->unit : "item";
  // pinned_wait's items are batches' waits, not batches' work.
  if (r.stage == Stage::kPinnedWait) unit = "wait";
  return absl::StrCat("p50 ", FormatDuration(*r.latency_p50_ns), ", p99 ",
                      FormatDuration(*r.latency_p99_ns), ", max ",
                      FormatDuration(*r.latency_max_ns), " per ", unit);
}

std::string StragglerClause(const Straggler& s) {
  const std::string stage(StageName(s.limiting_stage));
  return absl::StrFormat(
      "rank %d is the straggler: its %s limits it (%s); the others wait %.0f%% of the step for it",
      s.rank,
      s.limiting_stage != Stage::kCompute ? absl::StrCat("input pipeline (", stage, ")") : stage,
      s.verdict_class, s.others_wait_pct);
}

std::string BoundPhrase(const Bound& b, int cores) {
  switch (b.constraint) {
    case Constraint::kStage:
      return absl::StrCat(StageName(b.stage), "'s own threads");
    case Constraint::kSharedCpu:
      return absl::StrCat("the ", cores, cores == 1 ? " core" : " cores", " (", StageName(b.stage),
                          " takes the most CPU time)");
    case Constraint::kLink:
      return "the link (h2d copies)";
    case Constraint::kDevice:
      return "the device (compute)";
  }
  return "unknown";
}

}  // namespace sluice
