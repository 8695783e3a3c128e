// --check-advice: every suggestion of the report is an experiment. The job is run again over a
// bounded span (one epoch at most, `max_steps` optimizer steps, nothing evaluated or written),
// as it was and with the advised change, in turn, and the two rates are printed side by side.
//
// Errors: kInvalidArgument from ApplyAdvice for a change a rerun cannot make (a zstd level is a
// new dataset: sluice-shard create); the reruns' errors. Thread safety: runs jobs on the
// calling thread. The text of the results is AdviceChecksText (engine/job/advice_rerun.h).
#ifndef SLUICE_ENGINE_JOB_ADVICE_CHECK_H_
#define SLUICE_ENGINE_JOB_ADVICE_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/job/advice_rerun.h"
#include "engine/job/train_job.h"
#include "report/advice/advice.h"

namespace sluice {

// `options` with `advice` applied (its setting set to its value).
absl::Status ApplyAdvice(const Advice& advice, TrainJobOptions* options);

// Checks each piece of `advice` against `base`: `rounds` pairs (as it was, with the change) of
// reruns of at most `max_steps` steps (RerunAdvice, engine/job/advice_rerun.h; a change
// ApplyAdvice refuses is not run, its message the note). `on_start` (may be null) is told
// each rerun's label.
absl::StatusOr<std::vector<AdviceCheck>> CheckAdvice(
    Env* env, const TrainJobOptions& base, const std::vector<Advice>& advice, int64_t max_steps,
    int rounds, const std::function<void(const std::string&)>& on_start);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_ADVICE_CHECK_H_
