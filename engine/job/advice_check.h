// --check-advice: every suggestion of the report is an experiment. The job is run again over a
// bounded span (one epoch at most, `max_steps` optimizer steps, nothing evaluated or written),
// as it was and with the advised change, in turn, and the two rates are printed side by side.
//
// Errors: kInvalidArgument from ApplyAdvice for a change a rerun cannot make (a zstd level is a
// new dataset: sluice-shard create); the reruns' errors. Thread safety: runs jobs on the
// calling thread.
#ifndef SLUICE_ENGINE_JOB_ADVICE_CHECK_H_
#define SLUICE_ENGINE_JOB_ADVICE_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/job/train_job.h"
#include "report/advice/advice.h"

namespace sluice {

// `options` with `advice` applied (its setting set to its value).
absl::Status ApplyAdvice(const Advice& advice, TrainJobOptions* options);

struct AdviceCheck {
  Advice advice;
  std::string note;                 // why it was not run (then the rates are 0)
  double before_samples_per_s = 0;  // the better of the rounds as the job was
  double after_samples_per_s = 0;   // the better of the rounds with the change
  double speedup() const {
    return before_samples_per_s > 0 ? after_samples_per_s / before_samples_per_s : 0;
  }
};

// Checks each piece of `advice` against `base`: `rounds` pairs (as it was, with the change) of
// reruns of at most `max_steps` steps. `on_start` (may be null) is told each rerun's label.
absl::StatusOr<std::vector<AdviceCheck>> CheckAdvice(
    Env* env, const TrainJobOptions& base, const std::vector<Advice>& advice, int64_t max_steps,
    int rounds, const std::function<void(const std::string&)>& on_start);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_ADVICE_CHECK_H_
