#include "storage/record_files.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/cifar10.h"
#include "storage/file_identity.h"
#include "storage/idx.h"
#include "storage/internal/input_buffer.h"
#include "storage/npy.h"

namespace sluice {
namespace {

using storage_internal::ReadWholeInputFile;

// The input is read whole, and its records are a copy of about the same size (the IDX values
// of a .gz file, whose size is not known yet, are checked again from the header,
// storage/idx.cc): refuse before reading when twice the files' total size cannot fit. A 3 GB
// CIFAR-10 file used to be read for 20 s and end in std::bad_alloc.
absl::Status CheckInputFits(const std::string& what, uint64_t total_bytes) {
  return CheckMemory(
      absl::StrCat(what, ": ", FormatBytes(total_bytes),
                   " of input, held twice while sharding (the files and their records),"),
      2 * total_bytes);
}

}  // namespace

absl::StatusOr<RecordInput> ReadImageLabelFiles(Env* env, const std::string& images_path,
                                                const std::string& labels_path,
                                                std::optional<ArrayLayout> layout) {
  RETURN_IF_ERROR(RefuseSameFiles(
      {images_path, labels_path},
      {absl::StrCat("images ", Printable(images_path)),
       absl::StrCat("labels ", Printable(labels_path))},
      "the images and the labels are two files (IDX: *-images-idx3-ubyte and "
      "*-labels-idx1-ubyte; .npy: an [N, ...] and an [N] array): give each its own"));
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> images_file,
                   env->NewRandomAccessFile(images_path));
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> labels_file,
                   env->NewRandomAccessFile(labels_path));
  RETURN_IF_ERROR(
      CheckInputFits(absl::StrCat(Printable(images_path), " and ", Printable(labels_path)),
                     images_file->Size() + labels_file->Size()));
  ASSIGN_OR_RETURN(std::string images, ReadWholeInputFile(*images_file));
  ASSIGN_OR_RETURN(std::string labels, ReadWholeInputFile(*labels_file));
  RecordInput in;
  in.sources.push_back({"images", BaseName(images_path), images.size(), Xxh3(images)});
  in.sources.push_back({"labels", BaseName(labels_path), labels.size(), Xxh3(labels)});
  const bool images_npy = IsNpy(images), labels_npy = IsNpy(labels);
  if (images_npy != labels_npy) {
    const std::string& npy = images_npy ? images_path : labels_path;
    const std::string& other = images_npy ? labels_path : images_path;
    return absl::InvalidArgumentError(
        absl::StrCat(npy, " is a NumPy .npy file but ", other,
                     " is not: give images and labels in one format (both .npy or both IDX)"));
  }
  if (images_npy) {
    ASSIGN_OR_RETURN(in.records, ParseNpyPair(images, images_path, labels, labels_path, layout));
    return in;
  }
  if (layout) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layout: ", images_path,
                     " is IDX, whose 4-D images are always (N, H, W, C); --layout applies to "
                     ".npy input"));
  }
  ASSIGN_OR_RETURN(in.records, ParseIdxPair(images, images_path, labels, labels_path));
  return in;
}

absl::StatusOr<RecordInput> ReadCifar10Files(Env* env, const std::string& spec,
                                             const std::string& split) {
  ASSIGN_OR_RETURN(std::vector<std::string> paths, Cifar10Files(env, spec, split));
  // Sizes first: a file that is not whole records is refused unread, and the memory check
  // comes before any byte is read.
  std::vector<std::unique_ptr<RandomAccessFile>> opened;
  uint64_t total = 0;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
    RETURN_IF_ERROR(CheckCifar10Size(path, file->Size()));
    total += file->Size();
    opened.push_back(std::move(file));
  }
  RETURN_IF_ERROR(CheckInputFits(
      paths.size() == 1 ? Printable(paths[0])
                        : absl::StrCat(Printable(spec), " (", paths.size(), " CIFAR-10 batches)"),
      total));
  std::vector<std::string> contents;
  contents.reserve(paths.size());
  RecordInput in;
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSIGN_OR_RETURN(std::string bytes, ReadWholeInputFile(*opened[i]));
    opened[i].reset();
    in.sources.push_back({"images+labels", BaseName(paths[i]), bytes.size(), Xxh3(bytes)});
    contents.push_back(std::move(bytes));
  }
  std::vector<std::pair<std::string, absl::string_view>> files;
  for (size_t i = 0; i < paths.size(); ++i) files.emplace_back(paths[i], contents[i]);
  ASSIGN_OR_RETURN(in.records, ParseCifar10(files));
  in.num_classes = kCifar10Classes;
  return in;
}

}  // namespace sluice
