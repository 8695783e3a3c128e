// sluice.write_dataset: shards NumPy arrays into a dataset split (storage/dataset_writer.h).
#ifndef SLUICE_PYTHON_SRC_WRITER_H_
#define SLUICE_PYTHON_SRC_WRITER_H_

#include <cstdint>
#include <string>

#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"

namespace sluice::python {

// images: uint8/float32 [N, H, W] or [N, H, W, C]; labels: uint8/int32/int64 [N] (int64 must
// fit in int32). Returns {"split", "records", "shards"}; raises ValueError on a bad array.
pybind11::dict WriteDatasetFromArrays(const std::string& out, const std::string& split,
                                      pybind11::array images, pybind11::array labels,
                                      uint64_t records_per_shard, uint32_t records_per_frame,
                                      int zstd_level, int threads);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_WRITER_H_
