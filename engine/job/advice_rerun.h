// Advice reruns: what sluice-train's --check-advice and sluice.Loader's
// report(check_advice=True) share, whatever runs the span. For each piece of a report's advice,
// in order: whether it is rerun or why not, `rounds` pairs of spans (as it was, then with the
// change) with the better rate of each kept, and the results as text in the consumer's words.
// The consumer runs the spans: sluice-train its job (CheckAdvice, engine/job/advice_check.h),
// the Python Loader new Loaders (python/sluice/advice_check.py, through _sluice: a span there
// iterates a Python Loader). The Loader's own part, which advice a Loader rerun can change and
// the step it simulates, is here too.
//
// Errors: the span's, unchanged; from LoaderRerunChange, kFailedPrecondition for a setting a
// Loader rerun cannot change and kInvalidArgument for a value that is not an int.
// Thread safety: runs the spans on the calling thread.
#ifndef SLUICE_ENGINE_JOB_ADVICE_RERUN_H_
#define SLUICE_ENGINE_JOB_ADVICE_RERUN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "report/advice/advice.h"
#include "report/record/run_record.h"

namespace sluice {

struct AdviceCheck {
  Advice advice;
  std::string note;                 // why it was not run (then the rates are 0)
  double before_samples_per_s = 0;  // the better of the rounds as the job was
  double after_samples_per_s = 0;   // the better of the rounds with the change
  double speedup() const {
    return before_samples_per_s > 0 ? after_samples_per_s / before_samples_per_s : 0;
  }
};

// Why a piece of advice is not rerun; "" when it is.
using AdviceNotRun = std::function<std::string(const Advice& advice)>;
// The rate of one span in samples/s: as it was (`change` null) or with `*change`; `round`
// counts from 0.
using AdviceSpan = std::function<absl::StatusOr<double>(const Advice* change, int round)>;

// One check per piece of `advice`, in order: `not_run`'s reason, or `rounds` (at least 1)
// pairs of spans, as it was then with the change, the better rate of each kept.
absl::StatusOr<std::vector<AdviceCheck>> RerunAdvice(const std::vector<Advice>& advice, int rounds,
                                                     const AdviceNotRun& not_run,
                                                     const AdviceSpan& span);

// The checks as text for `consumer`: "\ncheck-advice (each change against the run as it was,
// N steps, ...):\n" (the Loader: "... the loader as it was, N batches with your step as a
// sleep, ...") and a line per check (the advice's text, before, after, the speedup, or why it
// was not run); with no checks, one line saying the report suggests no change.
std::string AdviceChecksText(const std::vector<AdviceCheck>& checks, Consumer consumer,
                             int64_t steps, int rounds);

// A check as docs/report-schema.md's advice_check[] has it, for both consumers: setting,
// value, text (as `consumer` words it), note, before and after rates, speedup, the entry's
// predicted speedup, and `steps` (each rerun's span).
nlohmann::ordered_json AdviceCheckJson(const AdviceCheck& check, Consumer consumer, int64_t steps);

// sluice.Loader's reruns.
// Why a Loader rerun cannot check `setting` (a dtype changes what the step receives; a setting
// of sluice-train's CUDA backend or of the dataset); "" for a Loader argument it sets.
std::string LoaderRerunNote(AdviceSetting setting);

struct LoaderChange {
  std::string argument;  // "decompress_threads"
  int64_t value = 0;
};
// The Loader argument a rerun of `advice` sets, and its value.
absl::StatusOr<LoaderChange> LoaderRerunChange(const Advice& advice);

// The step a Loader rerun simulates as a sleep after each batch: the compute stage's busy time
// per step of the reported pass, in seconds (0 without steps).
double LoaderStepSeconds(int64_t compute_busy_ns, uint64_t steps);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_ADVICE_RERUN_H_
