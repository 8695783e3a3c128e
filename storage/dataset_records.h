// Reading a whole split back into memory (for export and tests; training streams frames
// through pipeline/ instead).
//
// Errors: those of Dataset::shard() and ShardReader (kDataLoss naming file, frame and offset).
// Thread safety: thread safe; uses `threads` TBB threads (0: all cores) to decode frames.
#ifndef SLUICE_STORAGE_DATASET_RECORDS_H_
#define SLUICE_STORAGE_DATASET_RECORDS_H_

#include "absl/status/statusor.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"

namespace sluice {

// All records of `dataset`, in order, with every frame checksum verified.
absl::StatusOr<RecordArrays> ReadAllRecords(const Dataset& dataset, int threads = 0);

}  // namespace sluice

#endif  // SLUICE_STORAGE_DATASET_RECORDS_H_
