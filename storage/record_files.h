// The input files of `sluice-shard create`, read into records: an images and a labels file in
// one format, told apart by their magic (IDX, raw or .gz: storage/idx.h; NumPy .npy:
// storage/npy.h), or CIFAR-10 binary batches (storage/cifar10.h).
//
// Errors: those of the readers, each naming the file; kInvalidArgument when the two files are in
// different formats, or a layout is given for input that has none to declare (IDX, CIFAR-10).
// Thread safety: stateless functions, thread safe.
#ifndef SLUICE_STORAGE_RECORD_FILES_H_
#define SLUICE_STORAGE_RECORD_FILES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "storage/array_layout.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"

namespace sluice {

struct RecordInput {
  RecordArrays records;
  std::vector<SourceEntry> sources;  // each file read: base name, size and XXH3 as read
  // The class count the input format fixes (CIFAR-10: 10), if any.
  std::optional<uint32_t> num_classes;
};

// An images and a labels file, both IDX or both .npy. `layout` applies to a 4-D .npy images
// array (storage/array_layout.h).
absl::StatusOr<RecordInput> ReadImageLabelFiles(Env* env, const std::string& images_path,
                                                const std::string& labels_path,
                                                std::optional<ArrayLayout> layout);

// CIFAR-10 batches: a directory or a comma-separated file list (Cifar10Files).
absl::StatusOr<RecordInput> ReadCifar10Files(Env* env, const std::string& spec,
                                             const std::string& split);

}  // namespace sluice

#endif  // SLUICE_STORAGE_RECORD_FILES_H_
