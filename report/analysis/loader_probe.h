// The bottleneck report of another library's loader, measured from outside (sluice.probe,
// python/sluice/probe.py): a torch DataLoader, or any iterator of batches, around the user's
// own training step. The probe sees two things per step: the time the step blocked in next()
// of the loader (the exposed wait) and the time from next() returning to the following next()
// call (the step). Its replay what-if re-serves one cached batch for a bounded number of steps
// and times them: the rate with free data. docs/bottleneck.md, "Any loader: sluice.probe".
//
//   LoaderProbeRecord r;            // filled by the probe: r.steps, r.samples, r.wait_ns, ...
//   absl::StatusOr<ProbeReport> rep = AnalyzeLoaderProbe(r, UsableCores());
//   std::cout << rep->ToText();     // two rows (loader, compute), the verdict, the what-if
//   json = rep->ToJson();           // docs/report-schema.md, plus the "probe" object
//
// The report is a BottleneckReport with two rows, loader and compute, in this order (not the
// six of a sluice run: BottleneckReport::row() does not apply to it). Its verdict uses the
// thresholds of AnalyzeRun's (docs/bottleneck.md, "Verdict").
// Thread safety: plain values.
#ifndef SLUICE_REPORT_ANALYSIS_LOADER_PROBE_H_
#define SLUICE_REPORT_ANALYSIS_LOADER_PROBE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "report/analysis/bottleneck_report.h"

namespace sluice {

// What the probe measured. Times are nanoseconds of one monotonic clock. A step counts once the
// loop asks for the next batch (its end); the wait before it counts with it, so over the
// counted steps wait_ns + step_ns is the span from each pass's first next() to its last step's
// end (time between passes, e.g. an evaluation, is in neither).
struct LoaderProbeRecord {
  std::string loader;       // what was wrapped, e.g. "torch.utils.data.DataLoader (num_workers=0)"
  uint64_t passes = 0;      // iterations over the loader that delivered a batch
  uint64_t steps = 0;       // steps whose end was seen
  uint64_t samples = 0;     // samples in their batches
  int64_t wait_ns = 0;      // blocked in next() of the loader, summed over those steps
  int64_t step_ns = 0;      // from next() returning to the following next() call, summed
  int64_t max_wait_ns = 0;  // the longest single wait (the first one holds the loader's start)
  // The replay what-if (0 steps: not run): steps on one cached batch, its samples, and the span
  // from the replay's first next() to its last step's end (its own next() is nearly free).
  uint64_t replay_steps = 0;
  uint64_t replay_samples = 0;
  int64_t replay_span_ns = 0;
  std::string replay_batch;  // which batch was replayed: "first" or "last"
  // The process's CPU time during the replay: the step's own CPU cost (0: not measured). Of
  // it, the time in the kernel, and the page faults the replay took (minor and major): a step
  // whose allocator hands large freed tensors back to the kernel faults them in again on every
  // step, and its speed swings with the allocator's state.
  int64_t replay_cpu_ns = 0;
  int64_t replay_sys_ns = 0;
  uint64_t replay_page_faults = 0;
  // The switch (0 samples: not measured; Probe.measure_switch): the sluice.Loader the user
  // would switch to, iterated alone without a step, timed from the start of the iteration:
  // its samples, the span, and the process's CPU time over it (its pipeline's threads).
  uint64_t sluice_samples = 0;
  int64_t sluice_span_ns = 0;
  int64_t sluice_cpu_ns = 0;
};

// The probe's own figures (the "probe" object of the JSON, docs/report-schema.md).
struct ProbeFigures {
  std::string loader;
  uint64_t passes = 0;
  int64_t wait_ns = 0;
  int64_t step_ns = 0;
  int64_t span_ns = 0;  // wait_ns + step_ns: the span the report covers
  double mean_wait_us = 0;
  double mean_step_us = 0;
  double max_wait_us = 0;
  // The replay: null when not run.
  std::optional<uint64_t> replay_steps;
  std::optional<double> replay_seconds;
  std::optional<double> replay_samples_per_s;
  std::string replay_batch;  // "first", "last"; empty when not run
  // The rate with free data: the replay's, else the steps' own (samples / step time).
  double free_data_samples_per_s = 0;
  std::string free_data_source;  // "replay" or "step_time"
  // The replay's CPU time over its span: the cores the step keeps busy (its BLAS or OpenMP
  // threads); the share of its CPU time spent in the kernel; its page faults per step. Null
  // when the replay's CPU time was not measured.
  std::optional<double> replay_cores_busy;
  std::optional<double> replay_kernel_pct;
  std::optional<double> replay_page_faults_per_step;
  double speedup = 0;  // free_data_samples_per_s / measured; 0 without steps
  // The switch: null when not measured. sluice.Loader alone, its CPU and the step's CPU per
  // sample, and the resource model's rate with both on the same cores (PredictSwitch).
  std::optional<double> switch_sluice_samples_per_s;
  std::optional<double> switch_sluice_cpu_us_per_sample;
  std::optional<double> switch_step_cpu_us_per_sample;
  std::optional<double> switch_samples_per_s;
  std::optional<double> switch_speedup;  // switch_samples_per_s / measured
  std::string switch_binding;            // "sluice", "step" or "shared-cpu"; "" when none
};

struct ProbeReport {
  BottleneckReport report;  // rows: loader, compute
  ProbeFigures probe;

  // The two rows, the measured and free-data rates, the verdict sentence and the notes.
  std::string ToText() const;
  // BottleneckReport::ToJson() with "probe" before "notes".
  nlohmann::ordered_json ToJson() const;
};

// The report of a probe's record. `cores` as AnalyzeRun's (values < 1 are 1). InvalidArgument
// naming the field for negative times, samples without steps, or a replay with no span.
absl::StatusOr<ProbeReport> AnalyzeLoaderProbe(const LoaderProbeRecord& record, int cores);

}  // namespace sluice

#endif  // SLUICE_REPORT_ANALYSIS_LOADER_PROBE_H_
