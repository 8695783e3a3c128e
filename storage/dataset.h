// Dataset: one split of a shard dataset, described by its manifest
// (docs/formats/shard.md, "Dataset directory and manifest").
//
// Ownership: a Dataset borrows its Env (which must outlive it) and owns its shard readers; a
// `const ShardReader*` from shard(i) stays valid as long as the Dataset lives.
// Errors: kNotFound when no manifest exists, kDataLoss for a manifest that does not parse or
// disagrees with a shard (message names the file and the field), kInvalidArgument for bad
// paths, and the Env's I/O errors.
// Thread safety: immutable after Open(); shard readers are opened lazily and cached, thread safe.
#ifndef SLUICE_STORAGE_DATASET_H_
#define SLUICE_STORAGE_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "storage/shard_format.h"
#include "storage/shard_reader.h"

namespace sluice {

struct ShardEntry {
  std::string file;  // base name within the dataset directory
  uint64_t first_record = 0;
  uint64_t record_count = 0;
  uint32_t frame_count = 0;
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
  // The shard's footer meta_checksum, checked when the shard is opened (a file of another
  // split or dataset under this shard's name); absent in manifests written before it existed.
  std::optional<uint64_t> meta_xxh3;
};

struct SourceEntry {
  std::string role;  // "images" | "labels"
  std::string file;
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;
};

struct ShardingOptions {
  uint64_t records_per_shard = 16384;
  uint32_t records_per_frame = 256;  // encoded records: the most a frame holds
  int zstd_level = 3;
  // Encoded records only (docs/formats/shard.md, "Version 2"): how frames are stored (fixed-size
  // records are always zstd), and the raw size at which a frame is closed, in [1, 2^31].
  FrameCodec codec = FrameCodec::kZstd;
  uint32_t frame_bytes = kDefaultFrameBytes;
};

struct Manifest {
  std::string split;
  uint64_t record_count = 0;
  RecordSpec spec;
  // Every label lies in [0, num_classes); absent in manifests written before the field existed
  // (docs/formats/shard.md, "label.num_classes").
  std::optional<uint32_t> num_classes;
  // The class names of an ImageFolder ingestion, index = label (sorted subfolder names); empty
  // otherwise. When set, its size equals num_classes.
  std::vector<std::string> class_names;
  // Records per class, index = label (label.class_counts): num_classes values summing to
  // record_count; empty in manifests written before the field existed and when num_classes is
  // over kMaxCountedClasses (storage/dataset_writer.h).
  std::vector<uint64_t> class_counts;
  // Encoded splits written by ingestion: the largest image (sample.max_*); absent in manifests
  // written before the field existed and when some record's header could not be read.
  std::optional<ImageSizeBound> image_bound;
  // With image_bound: the first record whose width x height is image_bound->max_pixels, the
  // image that sets the area bound (sample.max_pixels_record); absent in manifests written
  // before the field existed. Read only to name that image in an error.
  std::optional<uint64_t> max_pixels_record;
  ShardingOptions options;
  std::vector<ShardEntry> shards;
  std::vector<SourceEntry> sources;
  // Encoded splits from a folder or list file: each record's source file, relative to the
  // folder or as listed, in record order (record_sources); empty when not recorded. Read only
  // to name a record in an error.
  std::vector<std::string> record_sources;

  // Canonical JSON text (deterministic; see the format doc).
  std::string ToJson() const;
  // Parses and validates (counts add up, names are plain file names). `path` names errors.
  static absl::StatusOr<Manifest> FromJson(absl::string_view json, const std::string& path);
};

// How a Dataset's shards are held open (docs/limits.md, "Open files").
enum class ShardFiles {
  // shard(i) keeps each reader open: Open makes room for every shard under `ulimit -n`
  // (ReserveOpenFiles), or fails naming the limit needed.
  kKeepOpen,
  // The caller visits each shard once with OpenShard(i) and closes it (verify, inspect): a
  // few files at a time, whatever the shard count; Open reserves nothing.
  kOneAtATime,
};

// kNotFound for a directory without a manifest: "DIR: no *.manifest.json (not a dataset, or
// its writing did not finish)", and, when DIR holds subfolders or JPEG/PNG files (an image
// folder not yet sharded), the sluice-shard command that makes a dataset of it. `children`:
// DIR's entries.
absl::Status NoManifestError(Env* env, const std::string& dir,
                             const std::vector<std::string>& children);

class Dataset {
 public:
  // `path` is a manifest file, or a directory holding exactly one manifest or a manifest of
  // `default_split` (e.g. "train").
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(Env* env, const std::string& path,
                                                       absl::string_view default_split = "train",
                                                       ShardFiles files = ShardFiles::kKeepOpen);

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  const std::string& manifest_path() const { return manifest_path_; }
  uint64_t record_count() const { return manifest_.record_count; }
  const RecordSpec& spec() const { return manifest_.spec; }
  // Manifest path of the sibling split `split` in the same directory, if it exists.
  absl::StatusOr<std::string> SiblingManifest(absl::string_view split) const;

  // The reader of shard `i`, opened on first use and checked against the manifest entry
  // (record counts, spec, frame count). The pointer is owned by the Dataset and valid while it
  // lives; kOutOfRange for i >= manifest().shards.size().
  absl::StatusOr<const ShardReader*> shard(size_t i) const;
  // Opens every shard not yet open, up to `concurrency` at once (a remote dataset pays a
  // request's latency per open: 16 shards behind 20 ms took 0.8 s one at a time); shard(i)
  // then returns them at once. Returns the first failure, as shard(i) would.
  absl::Status OpenAllShards(int concurrency = 16) const;
  // A reader of shard `i` of the caller's own, checked as by shard(i) and closed when dropped;
  // not cached. Errors as shard(i).
  absl::StatusOr<std::unique_ptr<ShardReader>> OpenShard(size_t i) const;
  Env* env() const { return env_; }

 private:
  Dataset(Env* env, std::string dir, std::string manifest_path, Manifest m);
  Env* env_;
  std::string dir_;
  std::string manifest_path_;
  Manifest manifest_;
  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<ShardReader>> readers_;
};

// Checks every shard of `dataset` against its manifest entry (header fields, size, whole-file
// XXH3) and every frame's checksum and decompressed size (ShardReader::Verify), one shard open at
// a time (OpenShard), so any dataset may be verified under a low `ulimit -n`. Returns the first
// failure; frame-level failures name the file, frame and byte offset. `progress`, if set, is
// called with the record count of each shard verified.
absl::Status VerifyDataset(const Dataset& dataset,
                           const std::function<void(uint64_t)>& progress = {});

}  // namespace sluice

#endif  // SLUICE_STORAGE_DATASET_H_
