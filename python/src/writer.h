// sluice.write_dataset: shards NumPy arrays into a dataset split (storage/dataset_writer.h).
#ifndef SLUICE_PYTHON_SRC_WRITER_H_
#define SLUICE_PYTHON_SRC_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"

namespace sluice::python {

// images: uint8/float32 [N, D], [N, H, W], or 4-D in `layout` ("NHWC", "NCHW", or empty: see
// storage/array_layout.h), stored as (H, W, C); labels: uint8/int32/int64 [N] (int64 must fit
// in int32), each in [0, num_classes) (num_classes 0: the largest label + 1, recorded in the
// manifest). Returns {"split", "records", "shards", "num_classes"}; raises ValueError on a bad
// array or label. The array is read in place through its strides, a frame at a time while the
// frames are compressed (zero-stride broadcast arrays, slices, negative strides, Fortran order
// and memmaps alike): the write holds its frames in flight, never a copy of the array.
pybind11::dict WriteDatasetFromArrays(const std::string& out, const std::string& split,
                                      pybind11::array images, pybind11::array labels,
                                      uint64_t records_per_shard, uint32_t records_per_frame,
                                      int zstd_level, int threads, const std::string& layout,
                                      uint64_t num_classes);

// images: a list of bytes, each a JPEG or PNG file's bytes, stored as they are (shard version
// 2, docs/formats/shard.md); labels as for WriteDatasetFromArrays; `classes` (optional, as many
// as num_classes) recorded as the class names; codec "none" or "zstd". Raises TypeError for an
// item that is not bytes and ValueError naming the record for an empty or non-JPEG/PNG one,
// one whose header declares more than `max_image_pixels` pixels (0: no bound;
// CheckDeclaredPixels, sluice-shard create's --max-image-pixels), and, with `verify_images`
// "structure" or "decode" (sluice-shard create's --verify-images), one that fails that check;
// "none" checks the header's size only. Before anything is written.
pybind11::dict WriteDatasetFromEncoded(const std::string& out, const std::string& split,
                                       pybind11::list images, pybind11::array labels,
                                       uint64_t records_per_shard, uint32_t records_per_frame,
                                       uint32_t frame_bytes, const std::string& codec,
                                       int zstd_level, int threads, uint64_t num_classes,
                                       std::vector<std::string> classes,
                                       std::vector<std::string> sources, uint64_t max_image_pixels,
                                       const std::string& verify_images);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_WRITER_H_
