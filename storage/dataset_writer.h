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

// Fixed-size records whose samples are read on demand, one frame's worth at a time (a strided
// or broadcast NumPy array, a memory-mapped file): a split far larger than memory is written
// holding only the frames in flight (WriteDataset below), never a copy of the whole split.
struct RecordSource {
  RecordSpec spec;
  uint64_t count = 0;
  std::string labels;  // count * spec.label_bytes() bytes, as RecordArrays::labels
  // Writes the samples of records [first, first + n) to `out`: n * spec.sample_bytes() bytes,
  // each sample as stored (H, W, C), little-endian. Called from several threads at once, for
  // disjoint ranges; cannot fail (the caller checked the source before the write).
  std::function<void(uint64_t first, uint32_t n, char* out)> read_samples;
};

// Encoded records (docs/formats/shard.md, "Version 2"): each sample is the bytes of a JPEG or
// PNG file, stored as they are; `labels` holds samples.size() labels of `label_dtype`.
struct EncodedRecords {
  LabelDType label_dtype = LabelDType::kU8;
  std::vector<std::string> samples;
  std::string labels;
  // Where each sample came from (e.g. a file path), for error messages; empty or one per sample.
  std::vector<std::string> names;
  // Each sample's source file as the manifest records it (record_sources: relative to the
  // image folder, or as the list file gives it); empty, or one per sample.
  std::vector<std::string> sources;
};

// How messages name the sharding options: sluice-shard create's flags by default;
// sluice.write_dataset names its arguments (python/src/writer.cc).
struct ShardingOptionNames {
  std::string records_per_frame = "--records-per-frame";
  std::string records_per_shard = "--records-per-shard";
};

// The most classes whose record counts a manifest records (label.class_counts): ImageNet-21k's
// 21841 fit; labels used as ids of millions of classes would make the manifest their list.
inline constexpr uint32_t kMaxCountedClasses = 65536;

struct WriteDatasetOptions {
  ShardingOptions sharding;
  ShardingOptionNames names;
  int threads = 0;  // frame compression threads (0: all cores); output bytes do not depend on it
  std::vector<SourceEntry> sources;  // recorded in the manifest
  // Recorded in the manifest as label.num_classes; when set, a label outside [0, num_classes)
  // is refused before anything is written (the front doors set it with CheckLabels).
  std::optional<uint32_t> num_classes;
  // With num_classes, the manifest also records the records of each class (label.class_counts)
  // when there are at most kMaxCountedClasses classes.
  // Encoded records only: the class names (index = label) recorded in the manifest
  // (label.classes), as many as num_classes.
  std::vector<std::string> class_names;
  // Called with the number of records finished so far (from any thread); may be empty.
  std::function<void(uint64_t)> on_progress;
  // Another split of `dir` to remove before this one is written, when it exists: under the
  // lock, once the input is checked, its manifest is deleted and the deletion made durable
  // (then its shards, best effort), before any byte of this split is written. Splits written
  // as a pair one after the other (sluice-shard create --holdout-fraction: train, then test)
  // set it on the first write, so an interruption or a failure between the two leaves the new
  // first split and no second one, never the new first split beside the old second one, which
  // shares records with it (docs/formats/shard.md, "Held-out split"). Empty: none.
  std::string remove_split_first;
};

// The class count of `records`: `requested` if given, else the largest label + 1. Refuses
// (kInvalidArgument) a negative label, or one >= the class count, naming the first such record's
// index and value; and a class count outside [1, 256] for u8 labels, [1, 2^31 - 1] for i32.
absl::StatusOr<uint32_t> CheckLabels(const RecordArrays& records,
                                     std::optional<uint64_t> requested);
absl::StatusOr<uint32_t> CheckLabels(const EncodedRecords& records,
                                     std::optional<uint64_t> requested);
absl::StatusOr<uint32_t> CheckLabels(const RecordSource& records,
                                     std::optional<uint64_t> requested);

// CheckSplitName, the split-name check of every write, is in storage/shard_format.h.

// A fixed-size frame holds at most min(records_per_frame, records_per_shard, records) records,
// and its raw size is at most 2^32 - 1 bytes: a split whose largest frame would exceed that is
// refused (kInvalidArgument naming options.names.records_per_frame). When records_per_frame
// records alone would exceed it (2 records of 20 MB with the default 256), the shards and the
// manifest record that smaller count as records_per_frame, so every reader accepts them.
//
// Writes split `split` of `records` into `dir` (created if needed), holding the directory's
// lock (docs/formats/lock.md; kUnavailable naming the holder if another writer has it). Output
// is byte-identical for the same input and options whatever `threads` is. An existing split is
// replaced by writing the new shards beside it under new names and switching the manifest;
// on error the old split (if any) is untouched and what this write added is removed.
absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordArrays& records,
                                      const WriteDatasetOptions& options);

// WriteDataset reading the samples from `records` frame by frame, with the same output bytes
// and guarantees. Every write streams this way: frames are assembled and compressed in
// bounded windows (at least two per thread, about kFrameWindowBytes of raw bytes) and written
// in order, so the memory a write holds is bounded by its frames in flight, not by the split.
absl::StatusOr<Manifest> WriteDataset(Env* env, const std::string& dir, const std::string& split,
                                      const RecordSource& records,
                                      const WriteDatasetOptions& options);

// The raw bytes of the frames one window of a write assembles and compresses at once (at least
// two frames per thread whatever their size): what a write holds beyond its frames' buffers.
inline constexpr uint64_t kFrameWindowBytes = uint64_t{64} << 20;

// Writes split `split` of encoded records as version 2 shards (docs/formats/shard.md,
// "Version 2"), with the guarantees of WriteDataset (lock, byte-identical output for any
// `threads`, atomic replacement). Frames are cut at options.sharding.records_per_frame records
// or frame_bytes raw bytes and stored with options.sharding.codec. Refuses (kInvalidArgument,
// naming the record and, when given, its name) a sample that is empty, larger than
// kMaxEncodedSampleBytes, or not a JPEG or PNG (by its signature; nothing is decoded).
// The manifest records the largest image (sample.max_*) when every sample's header gives its
// size (ReadImageHeader), and records.sources as record_sources.
absl::StatusOr<Manifest> WriteEncodedDataset(Env* env, const std::string& dir,
                                             const std::string& split,
                                             const EncodedRecords& records,
                                             const WriteDatasetOptions& options);

}  // namespace sluice

#endif  // SLUICE_STORAGE_DATASET_WRITER_H_
