#include "storage/record_files.h"

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "storage/cifar10.h"
#include "storage/idx.h"
#include "storage/npy.h"

namespace sluice {

absl::StatusOr<RecordInput> ReadImageLabelFiles(Env* env, const std::string& images_path,
                                                const std::string& labels_path,
                                                std::optional<ArrayLayout> layout) {
  ASSIGN_OR_RETURN(std::string images, ReadFileToString(env, images_path));
  ASSIGN_OR_RETURN(std::string labels, ReadFileToString(env, labels_path));
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
  std::vector<std::string> contents;
  contents.reserve(paths.size());
  RecordInput in;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(env, path));
    in.sources.push_back({"images+labels", BaseName(path), bytes.size(), Xxh3(bytes)});
    contents.push_back(std::move(bytes));
  }
  std::vector<std::pair<std::string, absl::string_view>> files;
  for (size_t i = 0; i < paths.size(); ++i) files.emplace_back(paths[i], contents[i]);
  ASSIGN_OR_RETURN(in.records, ParseCifar10(files));
  in.num_classes = kCifar10Classes;
  return in;
}

}  // namespace sluice
