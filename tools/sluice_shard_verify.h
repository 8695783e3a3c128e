// `sluice-shard verify` and `export`: every checksum and count of a dataset's splits, with a
// warning for each file no manifest lists; export writes a split back to raw IDX, only after the
// checks verify makes of it.
#ifndef SLUICE_TOOLS_SLUICE_SHARD_VERIFY_H_
#define SLUICE_TOOLS_SLUICE_SHARD_VERIFY_H_

#include <string>

#include "absl/status/status.h"
#include "common/env.h"

namespace sluice {

// Every split of a dataset directory, in manifest name order (or the one manifest `path` names),
// each printed as OK once verified; then a warning on stderr for each file of the directory that
// no manifest lists. The error names the first bad file, frame and byte offset.
absl::Status RunVerify(Env* env, const std::string& path);

// Split `split` of the dataset at `path` as PREFIX-images-idx3-ubyte and PREFIX-labels-idx1-ubyte;
// nothing is written when a check fails. `split` empty (no --split): the manifest `path` names,
// or a directory's train split, or its only split. A split named is that split or an error:
// a directory without it is kNotFound naming the split and listing those there, and a manifest
// of another split is kInvalidArgument naming both.
absl::Status RunExport(Env* env, const std::string& path, const std::string& prefix,
                       const std::string& split);

}  // namespace sluice

#endif  // SLUICE_TOOLS_SLUICE_SHARD_VERIFY_H_
