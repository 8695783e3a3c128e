// The what-if table: the same job rerun with one stage made free at a time
// (engine/job/what_if.h runs it). A row is a measurement the verdict defers to
// (report/decide/decide.h: the table wins over the inference where they disagree).
// Thread safety: plain values.
#ifndef SLUICE_REPORT_RECORD_WHAT_IF_ROWS_H_
#define SLUICE_REPORT_RECORD_WHAT_IF_ROWS_H_

#include <optional>
#include <string>

#include "pipeline/stage_stats.h"
#include "report/stages.h"

namespace sluice {

struct WhatIfRow {
  // The stage made free (one whose StageInfo::what_if is true); nullopt: the normal run.
  // kDecode and kTransforms are parts of preprocess; kTransforms never decides the verdict's
  // stage.
  std::optional<Stage> free_stage;
  std::string note;  // why the row was not run (then samples_per_s is 0)
  double samples_per_s = 0;
  double speedup = 0;  // samples_per_s / the normal run's
};

// "normal" for the normal run, else the stage's name.
inline std::string WhatIfRowName(const WhatIfRow& row) {
  return row.free_stage ? std::string(StageName(*row.free_stage)) : "normal";
}

}  // namespace sluice

#endif  // SLUICE_REPORT_RECORD_WHAT_IF_ROWS_H_
