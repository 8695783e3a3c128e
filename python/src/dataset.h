// sluice.Dataset: random access to the records of a sharded dataset split from Python, and
// its verification (as `sluice-shard verify`). Used by one Python thread (under the GIL).
#ifndef SLUICE_PYTHON_SRC_DATASET_H_
#define SLUICE_PYTHON_SRC_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "pybind11/pybind11.h"
#include "storage/dataset.h"
#include "storage/shard_reader.h"

namespace sluice::python {

// The manifest of split `split` of `path` (the `split=` argument of sluice.Loader and
// sluice.Dataset). No split: `path` as given (a directory's `train` split or its only one).
// A directory: its `<split>.manifest.json`, else kInvalidArgument listing the splits present
// (kNotFound when it holds none, or is no directory). A manifest: itself when it is of that
// split, else kInvalidArgument naming both splits.
absl::StatusOr<std::string> SplitManifestPath(const std::string& path,
                                              const std::optional<std::string>& split);

// sluice.Dataset's shards are opened one at a time (ShardFiles::kOneAtATime): the reader of
// the shard of the latest record stays open and is replaced when a record of another shard is
// read, so a Dataset (and its verify()) needs a few open files whatever its shard count
// (docs/limits.md, "Open files").
class PyDataset {
 public:
  // sluice.Dataset(path, split=None): `path` a str or os.PathLike, `split` a str or None;
  // TypeError naming the argument otherwise (not pybind11's "incompatible arguments").
  PyDataset(const pybind11::object& path, const pybind11::object& split);
  uint64_t size() const { return ds_->record_count(); }

  // ds[key]: Get for an int (anything with __index__), GetSlice for a slice; TypeError else.
  pybind11::tuple GetItem(const pybind11::object& key);
  // Record `i` as (np.ndarray [H, W] or [H, W, C], int label), or (bytes, int label) for an
  // encoded split (the image file's bytes); `i` < 0 counts from the end.
  // Decodes (and checksums) the frame holding it; the last frame is kept, so sequential access
  // decodes each frame once.
  pybind11::tuple Get(int64_t index);
  // The records of `slice` (Python's semantics) as (np.ndarray [n, ...one record's shape],
  // np.ndarray int64 [n]): the records of Get stacked, in the slice's order; for an encoded
  // split, a list of n bytes objects instead of the array.
  pybind11::tuple GetSlice(const pybind11::slice& slice);

  void Verify() const;
  const Dataset& dataset() const { return *ds_; }

 private:
  // Decodes frame `frame` of shard `shard` (read by `reader`) into frame_ unless it is there.
  void LoadFrame(const ShardReader& reader, size_t shard, uint32_t frame);
  // The reader of shard `shard`: reader_, reopened on that shard when it holds another.
  const ShardReader& Reader(size_t shard);
  // Record `index` (in [0, size())) in the decoded frame_: its sample, sample size and label.
  struct RecordRef {
    const char* sample;
    size_t size;
    const char* label;
  };
  // Decodes the frame of record `index` (in [0, size())); returns where the record lies.
  RecordRef Locate(uint64_t index);

  std::unique_ptr<Dataset> ds_;
  std::unique_ptr<ShardReader> reader_;
  size_t reader_shard_ = SIZE_MAX;
  std::string frame_;
  size_t cached_shard_ = SIZE_MAX;
  uint32_t cached_frame_ = 0;
};

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_DATASET_H_
