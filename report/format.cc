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
