// What-if runs (--what-if=all): the same job again with one stage made free at a time (data
// served from RAM, frames already decompressed, no preprocessing, no H2D copy, no compute),
// so the attribution of the bottleneck report can be checked by experiment: the stage whose
// removal speeds the run up most is the limit (docs/bottleneck.md). The verdict defers to the
// table where the two disagree: Decide (report/decide/decide.h) with the rows as evidence.
//
// Each rerun trains like the original (same data, order, model and epochs) but evaluates
// nothing and writes nothing (no checkpoints, metrics, export or trace).
// Errors: the first failed rerun's. Thread safety: runs jobs on the calling thread.
#ifndef SLUICE_ENGINE_JOB_WHAT_IF_H_
#define SLUICE_ENGINE_JOB_WHAT_IF_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/job/train_job.h"
#include "report/record/what_if_rows.h"
#include "report/stages.h"

namespace sluice {

// The job's training rate: its samples over its training seconds (0 when nothing trained).
double TrainSamplesPerSecond(const TrainResult& train);

// The options of a rerun (no evaluation, no outputs) with `stage` free (a stage whose
// StageInfo::what_if is true; nullopt: nothing free).
TrainJobOptions WhatIfOptions(const TrainJobOptions& base, std::optional<Stage> stage);

// The normal run (already done: `normal`), then each what-if stage of kStageTable made free
// in turn, in the table's order: h2d only on a device (a row with a note on the CPU), the chain
// alone only with transforms, decode only when the run decoded images. `on_start` is called
// before each rerun with its stage (progress; may be null).
absl::StatusOr<std::vector<WhatIfRow>> RunWhatIfTable(Env* env, const TrainJobOptions& base,
                                                      const TrainJobResult& normal,
                                                      const std::function<void(Stage)>& on_start);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_WHAT_IF_H_
