// Writing a whole split: records -> shards -> manifest, atomically
// (docs/formats/shard.md, "Atomicity").
#ifndef SLUICE_STORAGE_DATASET_WRITER_H_
#define SLUICE_STORAGE_DATASET_WRITER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "storage/dataset.h"
#include "storage/shard_format.h"

namespace sluice {

// Records in memory: `samples` holds count * spec.sample_bytes() bytes (little-endian values),
// `labels` count * spec.label_bytes().
struct RecordArrays {
  RecordSpec spec;
  uint64_t count = 0;
  std::string samples;
  std::string labels;
};

struct WriteDatasetOptions {
  ShardingOptions sharding;
  int threads = 0;  // frame compression threads (0: all cores); output bytes do not depend on it
  std::vector<SourceEntry> sources;  // recorded in the manifest
  // Recorded in the manifest as label.num_classes; when set, a label outside [0, num_classes)
  // is refused before anything is written (the front doors set it with CheckLabels).
  std::optional<uint32_t> num_classes;
  // Called with the number of records finished so far (from any thread); may be empty.
  std::function<void(uint64_t)> on_progress;
};

// The class count of `records`: `requested` if given, else the largest label + 1. Refuses
// (kInvalidArgument) a negative label, or one >= the class count, naming the first such record's
// index and value; and a class count outside [1, 256] for u8 labels, [1, 2^31 - 1] for i32.
absl::StatusOr<uint32_t> CheckLabels(const RecordArrays& records,
                                     std::optional<uint64_t> requested);

// Writes split `split` of `records` into `dir` (created if needed), holding the directory's
// lock (docs/formats/lock.md; kUnavailable naming the holder if another writer has it). Output
// is byte-identical for the same input and options whatever `threads` is. An existing split is
// replaced by writing the new shards beside it under new names and switching the manifest;
// on error the old split (if any) is untouched and what this write added is removed.
absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordArrays& records,
                                      const WriteDatasetOptions& options);

}  // namespace sluice

#endif  // SLUICE_STORAGE_DATASET_WRITER_H_
