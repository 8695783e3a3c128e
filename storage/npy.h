// NumPy .npy files (the subset docs/formats/npy.md specifies) to records.
//
// Read: format versions 1.0, 2.0 and 3.0; C order; little-endian (or byte-order-free) dtypes:
//   images: u1 or f4, shape [N, D], [N, H, W], or 4-D under a layout (storage/array_layout.h);
//   labels: u1, i4 or i8 (each value must fit in int32), shape [N].
// Samples come back in the stored (H, W, C) layout, little-endian, as shards hold them.
//
// Errors: kDataLoss for a file that is not a well-formed .npy (bad magic, version, header
// syntax, a data size that disagrees with the shape), naming the file and the byte or field;
// kInvalidArgument for a valid .npy outside the subset (a Fortran-order, big-endian, object or
// other dtype array, a shape sluice cannot store), naming the file and the header field.
// Thread safety: stateless functions, thread safe.
#ifndef SLUICE_STORAGE_NPY_H_
#define SLUICE_STORAGE_NPY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/array_layout.h"
#include "storage/dataset_writer.h"

namespace sluice {

// True when `bytes` start with the .npy magic "\x93NUMPY".
bool IsNpy(absl::string_view bytes);

// A parsed .npy header; `data` points into the parsed bytes.
struct NpyArray {
  std::string descr;  // as written, e.g. "<f4", "|u1"
  char kind = 0;      // 'u', 'i' or 'f'
  size_t item_bytes = 0;
  std::vector<uint64_t> shape;
  absl::string_view data;  // exactly product(shape) * item_bytes bytes
};

// Parses the header of the .npy file `bytes` and checks that it is in the subset read and that
// the data after it has exactly the size of the shape. `path` names errors.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, const std::string& path);

// Records from the contents of an images and a labels .npy file.
absl::StatusOr<RecordArrays> ParseNpyPair(absl::string_view images, const std::string& images_path,
                                          absl::string_view labels, const std::string& labels_path,
                                          std::optional<ArrayLayout> layout);

}  // namespace sluice

#endif  // SLUICE_STORAGE_NPY_H_
