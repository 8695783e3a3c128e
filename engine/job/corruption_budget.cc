#include "engine/job/corruption_budget.h"

#include <algorithm>

#include "common/status_macros.h"
#include "engine/job/corrupt_fraction.h"

namespace sluice {
namespace {

constexpr size_t kMaxMessages = 16;

}  // namespace

void CorruptionBudget::AddEvaluation(const PipelineStats& ts) {
  test_peak_.pool_bytes = std::max(test_peak_.pool_bytes, ts.pool_bytes);
  test_peak_.frame_buffer_bytes = std::max(test_peak_.frame_buffer_bytes, ts.frame_buffer_bytes);
  test_peak_.stored_buffer_bytes = std::max(test_peak_.stored_buffer_bytes, ts.stored_buffer_bytes);
  test_skipped_frames_ += ts.skipped_frames;
  test_skipped_records_ += ts.skipped_records;
  test_delivered_ += ts.samples_delivered;
  for (const std::string& m : ts.corrupt_frames) {
    if (test_corrupt_frames_.size() < kMaxMessages &&
        std::find(test_corrupt_frames_.begin(), test_corrupt_frames_.end(), m) ==
            test_corrupt_frames_.end()) {
      test_corrupt_frames_.push_back(m);
    }
  }
}

absl::Status CorruptionBudget::Check(const PipelineStats* train) const {
  int64_t counts[4] = {0, 0, static_cast<int64_t>(test_skipped_records_),
                       static_cast<int64_t>(test_delivered_)};
  std::vector<std::string> train_messages;
  if (train != nullptr) {
    // Both counted where the batches are built, which runs up to a pool of batches ahead of
    // delivery: skipped records against the samples delivered so far would overstate the
    // fraction (2 corrupt of 245 read as "4 of 279" in a 2-epoch run whose pool held a whole
    // epoch).
    counts[0] = static_cast<int64_t>(train->skipped_records);
    counts[1] = static_cast<int64_t>((*train)[Stage::kPreprocess].samples);
    train_messages = train->corrupt_frames;
  }
  std::vector<std::string> test_messages = test_corrupt_frames_;
  if (comm_ != nullptr && comm_->is_distributed()) {
    RETURN_IF_ERROR(comm_->AllReduceSum(counts, 4));
    if (train_messages.empty()) train_messages.push_back("(on another rank)");
    if (test_messages.empty()) test_messages.push_back("(on another rank)");
  }
  const auto count = [&counts](int i) { return static_cast<uint64_t>(counts[i]); };
  RETURN_IF_ERROR(CheckSplitCorruptFraction(
      "train", {train_manifest_, count(0), count(1), &train_messages}, max_fraction_));
  return CheckSplitCorruptFraction("test", {test_manifest_, count(2), count(3), &test_messages},
                                   max_fraction_);
}

}  // namespace sluice
