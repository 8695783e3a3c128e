// `sluice-shard create`: its options, checked from the flags before any file is touched (which
// input: --images and --labels, --cifar10, --image-folder or --image-list; the sharding; the
// options that apply to JPEG/PNG input only), and the run: read the input, check its labels,
// write the split (and the held-out one) and print what was written.
#ifndef SLUICE_TOOLS_SLUICE_SHARD_CREATE_H_
#define SLUICE_TOOLS_SLUICE_SHARD_CREATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "storage/array_layout.h"
#include "storage/dataset_writer.h"
#include "storage/image_structure.h"

namespace sluice {

// Options of `create`, checked before any file is touched so bad values are usage errors.
struct CreateOptions {
  std::string images, labels, cifar10, image_folder, image_list, out, split;
  bool skip_bad_images = false;
  bool verify_by_decoding = false;  // --verify-images=decode
  // --max-image-pixels: the most pixels an image may declare (0: no bound).
  uint64_t max_image_pixels = kDefaultMaxImagePixels;
  double holdout_fraction = 0;  // 0: no held-out split
  std::string holdout_split;
  std::optional<ArrayLayout> layout;
  std::optional<uint64_t> num_classes;
  WriteDatasetOptions write;
  bool quiet = false;
};

// The options the parsed flags describe. Errors are kInvalidArgument (a usage error) naming the
// flag.
absl::StatusOr<CreateOptions> CreateOptionsFromFlags();

// Writes the dataset `o` describes: fixed-size records from IDX, .npy or CIFAR-10 files, or
// version 2 shards of JPEG/PNG files; prints one summary line per split written (and the files
// ignored or skipped). Errors come from the libraries, prefixed with the input where they concern
// its labels.
absl::Status RunCreate(Env* env, CreateOptions o);

}  // namespace sluice

#endif  // SLUICE_TOOLS_SLUICE_SHARD_CREATE_H_
