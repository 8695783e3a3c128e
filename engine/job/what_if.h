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
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/job/train_job.h"
#include "report/record/what_if_rows.h"

namespace sluice {

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

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_WHAT_IF_H_
