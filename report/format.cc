#include "report/format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pipeline/stage_stats.h"

namespace sluice {

std::string FormatRate(double samples_per_s) {
  if (samples_per_s >= 1e6) return absl::StrFormat("%.2f M samples/s", samples_per_s / 1e6);
  if (samples_per_s >= 1e3) return absl::StrFormat("%.1f k samples/s", samples_per_s / 1e3);
  return absl::StrFormat("%.0f samples/s", samples_per_s);
}

std::string StragglerClause(const Straggler& s) {
  const absl::StatusOr<Stage> stage = ParseStage(s.limiting_stage);
  const bool pipeline_stage = stage.ok() && *stage != Stage::kCompute;
  return absl::StrFormat(
      "rank %d is the straggler: its %s limits it (%s); the others wait %.0f%% of the step for it",
      s.rank,
      pipeline_stage ? absl::StrCat("input pipeline (", s.limiting_stage, ")") : s.limiting_stage,
      s.verdict_class, s.others_wait_pct);
}

}  // namespace sluice
