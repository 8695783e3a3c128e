// The bottleneck report of a finished training job, with what only the job knows: the
// ceilings of its own configuration (measured once per host, dataset and build, then cached),
// and in a data-parallel run every rank's figures, gathered on rank 0.
//
//   ASSIGN_OR_RETURN(TrainJobResult result, RunTrainJob(env, options));
//   ASSIGN_OR_RETURN(JobReport report, ReportJob(env, options, result, settings));  // every rank
//   if (rank zero) print report.report.ToText(); WriteJobTrace(env, path, result, report);
//
// Errors: the communicator's errors in a data-parallel run; the Env's I/O errors for the trace.
// Ceilings that cannot be measured are not an error: the report then has no ceiling column,
// and `ceilings_note` says why. Thread safety: plain functions, on the job's thread.
#ifndef SLUICE_ENGINE_JOB_JOB_REPORT_H_
#define SLUICE_ENGINE_JOB_JOB_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "engine/diagnostics/ceilings.h"
#include "engine/job/train_job.h"
#include "nlohmann/json.hpp"
#include "report/analysis/bottleneck_report.h"
#include "report/record/data_parallel.h"

namespace sluice {

struct JobReportSettings {
  bool ceilings = true;           // --ceilings: compare the stages with measured ceilings
  bool refresh_ceilings = false;  // --refresh-ceilings: measure them again, ignoring the cache
  bool gather_traces = false;     // --trace in a data-parallel run: rank 0 gets every rank's
};

struct JobReport {
  BottleneckReport report;             // rank 0's, with the world's figures when distributed
  std::string ceilings_note;           // why there are no ceilings (empty: there are, or off)
  std::vector<RankSummary> ranks;      // data-parallel runs: index = rank
  std::vector<nlohmann::json> traces;  // data-parallel runs with gather_traces, on rank 0
};

// The ceilings for the report, measured once per host and dataset and cached. nullopt (with
// `why`) when off or when they cannot be measured.
std::optional<Ceilings> LoadJobCeilings(Env* env, const TrainJobOptions& options,
                                        const TrainJobResult& result,
                                        const JobReportSettings& settings, std::string* why);

// The report. In a data-parallel run every rank calls this at the same point after training
// (its collectives gather the ranks' summaries, the exchange ceiling and the traces); the
// others' reports hold only their own figures.
absl::StatusOr<JobReport> ReportJob(Env* env, const TrainJobOptions& options,
                                    const TrainJobResult& result,
                                    const JobReportSettings& settings);

// --trace: the run's Chrome/Perfetto trace; in a data-parallel run rank 0 writes one process
// per rank (aligned in time when the ranks share a host).
absl::Status WriteJobTrace(Env* env, const std::string& path, const TrainJobResult& result,
                           const JobReport& report);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_JOB_REPORT_H_
