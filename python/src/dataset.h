// sluice.Dataset: random access to the records of a sharded dataset split from Python, and
// its verification (as `sluice-shard verify`). Used by one Python thread (under the GIL).
#ifndef SLUICE_PYTHON_SRC_DATASET_H_
#define SLUICE_PYTHON_SRC_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pybind11/pybind11.h"
#include "storage/dataset.h"
#include "storage/shard_reader.h"

namespace sluice::python {

class PyDataset {
 public:
  PyDataset(const std::string& path, const std::string& split);
  uint64_t size() const { return ds_->record_count(); }

  // Record `i` as (np.ndarray [H, W] or [H, W, C], int label). Decodes (and checksums) the
  // frame holding it; the last frame is kept, so sequential access decodes each frame once.
  pybind11::tuple Get(int64_t index);

  void Verify() const;
  const Dataset& dataset() const { return *ds_; }

 private:
  // Decodes frame `frame` of shard `shard` (read by `reader`) into frame_ unless it is there.
  void LoadFrame(const ShardReader& reader, size_t shard, uint32_t frame);

  std::unique_ptr<Dataset> ds_;
  std::string frame_;
  size_t cached_shard_ = SIZE_MAX;
  uint32_t cached_frame_ = 0;
};

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_DATASET_H_
