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

std::string StragglerClause(const Straggler& s) {
  const std::string stage(StageName(s.limiting_stage));
  return absl::StrFormat(
      "rank %d is the straggler: its %s limits it (%s); the others wait %.0f%% of the step for it",
      s.rank,
      s.limiting_stage != Stage::kCompute ? absl::StrCat("input pipeline (", stage, ")") : stage,
      s.verdict_class, s.others_wait_pct);
}

}  // namespace sluice
