#include "engine/job/corruption_budget.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

constexpr size_t kMaxMessages = 16;

// Skipped / read records of one split against the limit.
absl::Status CheckCorruptFraction(const std::string& split, const std::string& manifest,
                                  uint64_t skipped, uint64_t delivered,
                                  const std::vector<std::string>& messages, double limit) {
  if (skipped == 0) return absl::OkStatus();
  const double fraction = static_cast<double>(skipped) / static_cast<double>(skipped + delivered);
  if (fraction <= limit) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "%s: %d of %d records of the %s split read so far were skipped as corrupt (%.4g), above "
      "--max-corrupt-fraction=%g; first: %s",
      manifest, skipped, skipped + delivered, split, fraction, limit,
      messages.empty() ? std::string("(no message)") : messages.front()));
}

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
  RETURN_IF_ERROR(CheckCorruptFraction("train", train_manifest_, counts[0], counts[1],
                                       train_messages, max_fraction_));
  return CheckCorruptFraction("test", test_manifest_, counts[2], counts[3], test_messages,
                              max_fraction_);
}

}  // namespace sluice
