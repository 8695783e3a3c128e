// Folders and lists of encoded image files, read into EncodedRecords for WriteEncodedDataset
// (`sluice-shard create --image-folder / --image-list`, docs/formats/shard.md "Version 2").
//
// ListImageFolder follows torchvision's ImageFolder: the classes are DIR's subfolders sorted by
// name (class k = the k-th); a class's files are found by walking its folder (subfolders too,
// following symbolic links), visiting folders in sorted path order and each folder's files in
// sorted name order, keeping the names that end, ignoring case, in one of torchvision's
// IMG_EXTENSIONS. Files with other names are counted, not read. sluice stores JPEG and PNG only:
// a .bmp or .webp passes the name filter and is refused (or skipped) when read.
// ReadImageListFile reads a list file (docs/formats/shard.md, "Image list file").
//
// Errors: kNotFound / kInvalidArgument naming the folder, file or list line and what was
// expected. Thread safety: stateless functions; ReadImageFiles uses `threads` TBB threads.
#ifndef SLUICE_STORAGE_IMAGE_FILES_H_
#define SLUICE_STORAGE_IMAGE_FILES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "storage/dataset_writer.h"

namespace sluice {

// torchvision.datasets.folder.IMG_EXTENSIONS, matched ignoring case.
inline constexpr const char* kImageExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                   ".pgm", ".tif",  ".tiff", ".webp"};

struct ImageList {
  std::vector<std::string> paths;  // files to read, in record order
  std::vector<std::string> names;  // how errors name each (relative to the folder or as listed)
  std::vector<uint32_t> labels;    // one per path
  std::vector<std::string> class_names;  // ImageFolder only: index = label
  uint64_t ignored_files = 0;            // ImageFolder: files without an image extension
};

absl::StatusOr<ImageList> ListImageFolder(const std::string& dir);

// One record per non-blank line: a path, then a separator (the last ',', space or tab on the
// line), then a label: a decimal integer in [0, 2^31 - 1]. A relative path is relative to the
// list file's folder. Errors name "<list>:<line>".
absl::StatusOr<ImageList> ReadImageListFile(Env* env, const std::string& list_path);

struct ReadImagesOptions {
  int threads = 0;  // 0: all cores; the records do not depend on it
  // Leave out files that are empty or not JPEG/PNG by signature (counted in skipped); else
  // they are kept for WriteEncodedDataset to refuse, naming the file.
  bool skip_bad_images = false;
  std::function<void(uint64_t)> on_progress;  // files read so far (from any thread)
};

struct ImageRecords {
  EncodedRecords records;     // label dtype u8 when every label < 256, else i32
  uint64_t skipped = 0;       // with skip_bad_images
  std::string first_skipped;  // "<name>: <reason>" of the first skipped file
};

// Reads the files of `list` in parallel, in list order. Every file is held in memory (and its
// frames again while sharding): kResourceExhausted before reading when twice their total size
// exceeds the memory available (common/limits.h CheckMemory).
absl::StatusOr<ImageRecords> ReadImageFiles(Env* env, const ImageList& list,
                                            const ReadImagesOptions& options);

}  // namespace sluice

#endif  // SLUICE_STORAGE_IMAGE_FILES_H_
