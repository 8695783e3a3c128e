// The limit of on_corrupt=skip: reading fails once more than a fraction of the records read
// were skipped as corrupt. sluice-train checks each split so far against --max-corrupt-fraction
// (CorruptionBudget, engine/job/corruption_budget.h); sluice.Loader checks each finished pass
// against max_corrupt_fraction (python/sluice/corruption_budget.py, through _sluice). One
// check, worded for each.
//
// Errors: kDataLoss naming the manifest, the counts, the limit and the first corrupt frame.
// Thread safety: pure functions.
#ifndef SLUICE_ENGINE_JOB_CORRUPT_FRACTION_H_
#define SLUICE_ENGINE_JOB_CORRUPT_FRACTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace sluice {

// `skipped` records skipped as corrupt and `read` kept, of `manifest`, against `limit`: OK
// when none was skipped or skipped / (skipped + read) <= limit. `messages`: the corrupt
// frames' messages, the first named ("(no message)" when empty).
struct CorruptCounts {
  std::string_view manifest;
  uint64_t skipped = 0;
  uint64_t read = 0;
  const std::vector<std::string>* messages = nullptr;  // borrowed; null: none
};

// sluice-train: "M: 3 of 300 records of the train split read so far were skipped as corrupt
// (0.01), above --max-corrupt-fraction=0.005; first: ...".
absl::Status CheckSplitCorruptFraction(std::string_view split, const CorruptCounts& counts,
                                       double limit);

// sluice.Loader, at the end of a pass: "M: 3 of 300 records read in epoch 0 were skipped as
// corrupt (0.01), above max_corrupt_fraction=0.005; first: ...".
absl::Status CheckPassCorruptFraction(uint64_t epoch, const CorruptCounts& counts, double limit);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_CORRUPT_FRACTION_H_
