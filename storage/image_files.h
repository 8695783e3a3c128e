// Folders and lists of encoded image files, read into EncodedRecords for WriteEncodedDataset
// (`sluice-shard create --image-folder / --image-list`, docs/formats/shard.md "Version 2").
//
// ListImageFolder follows torchvision's ImageFolder: the classes are DIR's subfolders sorted by
// name (class k = the k-th); a class's files are found by walking its folder (subfolders too,
// following symbolic links), visiting folders in sorted path order and each folder's files in
// sorted name order, keeping the names that end, ignoring case, in one of torchvision's
// IMG_EXTENSIONS. Files with other names, and files directly in DIR, are counted (the first
// few named, with why), not read. sluice stores JPEG and PNG only: a .bmp or .webp passes the
// name filter and is refused (or skipped) when read.
// The walk visits each folder once (by device and inode): a symbolic link that leads back to
// a folder containing it (a loop) is an error naming the link and that folder, and so is a
// folder reached twice or more than kMaxFolderDepth levels below DIR.
// ReadImageListFile reads a list file (docs/formats/shard.md, "Image list file").
//
// Both look at every file with stat(2) (links followed; nothing is opened, so a FIFO never
// blocks): two entries that are one file (the same device and inode: the same path spelled
// twice, a hard link, a symbolic link) are an error naming both, and a file that is not a
// regular file (a FIFO, a socket, a device, a folder) or a broken symbolic link is a bad image
// (ImageList::not_regular).
// Names in messages go through Printable (common/printable.h).
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
#include "storage/image_structure.h"

namespace sluice {

// torchvision.datasets.folder.IMG_EXTENSIONS, matched ignoring case.
inline constexpr const char* kImageExtensions[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                                   ".pgm", ".tif",  ".tiff", ".webp"};

// How many of a kind of left-out files are named: the first few, then a count of the rest.
inline constexpr size_t kNamedExamples = 5;

// The deepest folder ListImageFolder walks, in levels below DIR (a class folder is level 1).
inline constexpr int kMaxFolderDepth = 64;

struct ImageList {
  std::vector<std::string> paths;    // files to read, in record order
  std::vector<std::string> names;    // how errors name each (the path, or "<list>:<line>: path",
                                     // through Printable)
  std::vector<std::string> sources;  // the manifest's record_sources: relative to DIR, or as listed
  std::vector<uint32_t> labels;      // one per path
  std::vector<std::string> class_names;  // ImageFolder only: index = label
  // One per path, from stat(2): why the file cannot be an image without opening it ("is not a
  // regular file (a FIFO), ...", "is a broken symbolic link to ..."), else empty. ReadImageFiles
  // counts such a file as a bad image and never opens it. Empty vector: nothing known (every file
  // is opened).
  std::vector<std::string> not_regular;
  // ImageFolder: files left out by name (no image extension, or not in a class folder); the
  // first kNamedExamples as "<path relative to DIR>: <why>".
  uint64_t ignored_files = 0;
  std::vector<std::string> ignored_examples;
};

absl::StatusOr<ImageList> ListImageFolder(const std::string& dir);

// One record per non-blank line: a path, then a separator (the last ',', space or tab on the
// line; spaces and tabs after a ',' belong to it), then a label: a decimal integer in
// [0, kMaxLabel = 2^31 - 2]. The path is used exactly as written (only the line end, "\n" or
// "\r\n", is stripped): "x.jpg ,0" names "x.jpg ". A relative path is relative
// to the list file's folder. A leading UTF-8 byte-order mark is skipped (as Python's "utf-8-sig");
// a NUL byte on a line, or a UTF-16 byte-order mark, is an error. Errors name "<list>:<line>".
absl::StatusOr<ImageList> ReadImageListFile(Env* env, const std::string& list_path);

struct ReadImagesOptions {
  int threads = 0;  // 0: all cores; the records do not depend on it
  // Every file gets CheckImageStructure (storage/image_structure.h: zero bytes, not JPEG/PNG,
  // truncated); a file that is not a regular file (ImageList::not_regular) fails unread, and
  // one that reads shorter than its size (a /proc or /sys file) fails too. A
  // file that fails is an error naming it (kInvalidArgument, the first in list order), or,
  // with skip_bad_images, left out and counted in skipped.
  bool skip_bad_images = false;
  // Also bad images, found before their bytes are read or decoded: a file over 2^28 bytes
  // (CheckImageFileSize, from its size: never read), and one whose header declares more than
  // max_image_pixels pixels (CheckDeclaredPixels; 0: no bound), checked before extra_check.
  uint64_t max_image_pixels = kDefaultMaxImagePixels;
  // If set, also run on every file that passes the structure check, from the reading threads
  // (e.g. a full decode, pipeline/transforms/decode_check.h); a failure counts as a bad image,
  // its message the reason.
  std::function<absl::Status(absl::string_view bytes)> extra_check;
  std::function<void(uint64_t)> on_progress;  // files read so far (from any thread)
};

struct ImageRecords {
  EncodedRecords records;                     // label dtype u8 when every label < 256, else i32
  uint64_t skipped = 0;                       // with skip_bad_images
  std::vector<std::string> skipped_examples;  // the first kNamedExamples: "<name>: <reason>"
};

// Reads the files of `list` in parallel, in list order. Every file is held in memory (and its
// frames again while sharding): kResourceExhausted before reading when twice their total size
// exceeds the memory available (common/limits.h CheckMemory).
absl::StatusOr<ImageRecords> ReadImageFiles(Env* env, const ImageList& list,
                                            const ReadImagesOptions& options);

// A held-out split from one input (`sluice-shard create --holdout-fraction F`): record i goes
// to `held_out` when XXH3-64 of its source (records.sources[i], the path relative to the folder
// or as listed) is below F * 2^64, else to `kept`; both keep the input order. A file's side
// depends on its path alone, so adding or removing other files moves no file across.
// kInvalidArgument when F is not in (0, 1), sources are missing, or a side would be empty.
struct HeldOutRecords {
  EncodedRecords kept;
  EncodedRecords held_out;
};
absl::StatusOr<HeldOutRecords> HoldOut(EncodedRecords records, double fraction);

}  // namespace sluice

#endif  // SLUICE_STORAGE_IMAGE_FILES_H_
