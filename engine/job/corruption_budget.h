// CorruptionBudget: --on-corrupt=skip with --max-corrupt-fraction. Corrupt frames are skipped
// and counted by the pipelines; the run fails once more than the fraction of the records read
// in a split (train, or the test split's evaluations summed over epochs) were skipped.
//
// In a data-parallel run the limit applies to the job: Check sums the counts over the ranks
// (every rank calls it at the same points), so the verdict does not depend on which rank a
// corrupt frame's samples fell to.
// The fraction and its message are corrupt_fraction.h's, shared with sluice.Loader.
// Errors: kDataLoss naming the manifest, the counts, the limit and the first corrupt frame.
// Thread safety: used by the training thread only.
#ifndef SLUICE_ENGINE_JOB_CORRUPTION_BUDGET_H_
#define SLUICE_ENGINE_JOB_CORRUPTION_BUDGET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/dist/communicator.h"
#include "pipeline/stage_stats.h"

namespace sluice {

class CorruptionBudget {
 public:
  // `comm`: the job's world (null: one process); borrowed.
  CorruptionBudget(double max_fraction, std::string train_manifest, std::string test_manifest,
                   dist::Communicator* comm)
      : max_fraction_(max_fraction),
        train_manifest_(std::move(train_manifest)),
        test_manifest_(std::move(test_manifest)),
        comm_(comm) {}

  // After each evaluation: that evaluation's test pipeline (it is rebuilt for each one).
  void AddEvaluation(const PipelineStats& test);
  // Fails once a split is over the limit. `train`: the train pipeline's figures so far (null
  // before it started). A collective in a data-parallel run.
  absl::Status Check(const PipelineStats* train) const;

  uint64_t test_skipped_frames() const { return test_skipped_frames_; }
  uint64_t test_skipped_records() const { return test_skipped_records_; }
  const std::vector<std::string>& test_corrupt_frames() const { return test_corrupt_frames_; }
  // The buffer figures of the largest evaluation (for the host memory table).
  const PipelineStats& test_peak() const { return test_peak_; }

 private:
  double max_fraction_;
  std::string train_manifest_;
  std::string test_manifest_;
  dist::Communicator* comm_;
  uint64_t test_skipped_frames_ = 0;
  uint64_t test_skipped_records_ = 0;
  uint64_t test_delivered_ = 0;
  std::vector<std::string> test_corrupt_frames_;  // distinct messages, the first 16
  PipelineStats test_peak_;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_CORRUPTION_BUDGET_H_
