// The files of a dataset directory, and the check that keeps an output off them
// (docs/limits.md, "Files sluice writes"): a report or an export written over a manifest or a
// shard replaced it, and the run or the Python call still succeeded.
//
// A dataset's files are "<split>.manifest.json" (every split's), "*.shard" and the directory
// lock ".sluice.lock" (docs/formats/shard.md, docs/formats/lock.md). An output is one of them
// when it lies in the dataset's directory under such a name (however the path is spelled:
// "..", ".", a linked directory), or when it is the same file (device and inode) as one of them
// under another name: a hard link or a symbolic link to it.
//
// Errors: kInvalidArgument, one line naming the output (`what`, e.g. "--report-json" or
// "report_html: path"), its path and the dataset's directory (escaped, common/printable.h):
// "--report-json ds/train.manifest.json is a file of the dataset in /data/ds: it would
// replace it". Thread safety: pure functions of the file system.
#ifndef SLUICE_STORAGE_DATASET_FILES_H_
#define SLUICE_STORAGE_DATASET_FILES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice {

// Whether `name` (a base name) is one of a dataset directory's files: a manifest, a shard or
// the lock, or a writer's temporary of one ("<file>.tmp").
bool IsDatasetFileName(absl::string_view name);

// The directory of the dataset `data` names (a directory, or a manifest in one), resolved
// (links, "..", "."); "" when it does not exist.
std::string ResolvedDatasetDir(const std::string& data);

// `path` with its directory resolved (links, "..", "."), so two spellings of one file compare
// equal; `path` as given when its directory does not exist.
std::string ResolvedOutputPath(const std::string& path);

// OK unless the output `path` is a file of the dataset `data` names (a directory, or a manifest
// in one): see above. OK too when the dataset's directory does not exist.
absl::Status CheckNotADatasetFile(const std::string& path, const std::string& data,
                                  absl::string_view what);

// The index of the first of `paths` that CheckNotADatasetFile(path, data, ...) refuses, or
// paths.size() when none is a file of the dataset: the same test, with the dataset's directory
// resolved and its files' identities read once, so the N files of an image list or folder
// cost N stat(2) calls (none when the directory holds no dataset file), not N times the
// directory's files.
size_t FirstDatasetFile(const std::vector<std::string>& paths, const std::string& data);

// OK unless the output `path` is the input file `input`: the same resolved path (any spelling,
// a linked directory) or the same device and inode (a hard or symbolic link;
// storage/file_identity.h). Else kInvalidArgument "<what> <path> is <input_what> the run reads
// (<input>): it would replace it", e.g. `input_what` "the --data IDX file". An `input` not
// written yet (a checkpoint) is compared by its path alone.
absl::Status CheckNotAnInputFile(const std::string& path, const std::string& input,
                                 absl::string_view what, absl::string_view input_what);

// OK unless the output `path` is a file the cache directory `cache_dir` holds: a manifest,
// shard or lock of a dataset in one of its subdirectories (IDX input sharded there), or a
// measured-ceilings file (cache_dir/ceilings/<key>.json), by any spelling or link as above.
// Other files under `cache_dir` are not refused (--cache-dir=. keeps reports beside it). OK
// when the directory does not exist.
absl::Status CheckNotACacheFile(const std::string& path, const std::string& cache_dir,
                                absl::string_view what);

}  // namespace sluice

#endif  // SLUICE_STORAGE_DATASET_FILES_H_
