// What-if runs (--what-if=all): the same job again with one stage made free at a time (data
// served from RAM, frames already decompressed, no preprocessing, no H2D copy, no compute),
// so the attribution of the bottleneck report can be checked by experiment: the stage whose
// removal speeds the run up most is the limit (docs/bottleneck.md).
//
// Each rerun trains like the original (same data, order, model and epochs) but evaluates
// nothing and writes nothing (no checkpoints, metrics, export or trace).
// Errors: the first failed rerun's. Thread safety: runs jobs on the calling thread.
#ifndef SLUICE_ENGINE_JOB_WHAT_IF_H_
#define SLUICE_ENGINE_JOB_WHAT_IF_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/job/train_job.h"
#include "report/analysis/bottleneck_report.h"

namespace sluice {

struct WhatIfRow {
  // "normal", "read", "decompress", "preprocess", "h2d", "compute", or "transforms" (the chain
  // alone, a part of preprocess: it never decides the verdict's stage)
  std::string free_stage;
  std::string note;  // why the row was not run (then samples_per_s is 0)
  double samples_per_s = 0;
  double speedup = 0;  // samples_per_s / the normal run's
};

// The job's training rate: its samples over its training seconds (0 when nothing trained).
double TrainSamplesPerSecond(const TrainResult& train);

// The options of the rerun with `stage` free ("compute", or a pipeline stage's name).
TrainJobOptions WhatIfOptions(const TrainJobOptions& base, const std::string& stage);

// The normal run (already done: `normal`), then each stage made free in turn, then (with
// transforms) the chain alone. `on_start` is
// called before each rerun with the stage's name (progress; may be null).
absl::StatusOr<std::vector<WhatIfRow>> RunWhatIfTable(
    Env* env, const TrainJobOptions& base, const TrainJobResult& normal,
    const std::function<void(const std::string&)>& on_start);

// The verdict and the what-if table never contradict each other, and the table wins: it is an
// experiment, the attribution an inference. When the stage whose freeing gave the largest
// measured speedup is not `report`'s limiting stage, it becomes the limiting stage, the class
// follows it (compute-bound for compute, input-bound for a pipeline stage unless the verdict
// already blamed the input), the advice is the advice for that stage, and the sentence says that
// the measurement decided it, with both speedups ("within 15%" when they are that close).
// `run` is the normal run's record. Rows with a note or no rate are not measurements.
void ReconcileVerdictWithWhatIf(const std::vector<WhatIfRow>& rows, const RunRecord& run,
                                BottleneckReport* report);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_WHAT_IF_H_
