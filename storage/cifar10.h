// CIFAR-10's binary batches (data_batch_1.bin ... data_batch_5.bin, test_batch.bin) to records
// (docs/formats/cifar10.md).
//
// Each file is a sequence of 3,073-byte records: one label byte (0..9), then 3,072 pixel bytes,
// the 32x32 red plane, then green, then blue (CHW). Records come back u8 3x32x32 in the stored
// (H, W, C) layout with u8 labels, in file order.
// Errors: kDataLoss naming the file and its size when the size is not a positive multiple of
// 3,073; kInvalidArgument for no files. Thread safety: stateless functions, thread safe.
#ifndef SLUICE_STORAGE_CIFAR10_H_
#define SLUICE_STORAGE_CIFAR10_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "storage/dataset_writer.h"

namespace sluice {

inline constexpr size_t kCifar10Side = 32;
inline constexpr size_t kCifar10Channels = 3;
inline constexpr size_t kCifar10PixelBytes = kCifar10Channels * kCifar10Side * kCifar10Side;
inline constexpr size_t kCifar10RecordBytes = 1 + kCifar10PixelBytes;  // 3,073
inline constexpr uint32_t kCifar10Classes = 10;
// The training batches of a CIFAR-10 directory: data_batch_1.bin ... data_batch_5.bin.
inline constexpr uint32_t kCifar10TrainBatches = 5;

// kDataLoss naming `path` and `bytes` when a batch file's size is not a positive multiple of
// kCifar10RecordBytes (checked from its size, before it is read, and again on its bytes).
absl::Status CheckCifar10Size(const std::string& path, uint64_t bytes);

// Records of the files' contents, `files` as {path, bytes}, concatenated in the order given;
// kResourceExhausted naming the first file when the records cannot be allocated.
absl::StatusOr<RecordArrays> ParseCifar10(
    const std::vector<std::pair<std::string, absl::string_view>>& files);

// The batch files `spec` names: a directory (its test_batch.bin for split "test", else its
// data_batch_*.bin in batch-number order), or a comma-separated list of files.
// A directory's other data_batch_*.bin (a number outside 1..5, a sign, not digits: "-1", "+3",
// "6", "99999999999999999999") is kInvalidArgument naming the file; other names are ignored.
// kNotFound naming the directory and what was looked for when it holds none. kInvalidArgument
// naming both when two files are one batch number (data_batch_01.bin and data_batch_1.bin) or
// one file (the same path spelled twice, a hard or symbolic link: storage/file_identity.h),
// whose records would be in the split twice.
absl::StatusOr<std::vector<std::string>> Cifar10Files(Env* env, const std::string& spec,
                                                      const std::string& split);

}  // namespace sluice

#endif  // SLUICE_STORAGE_CIFAR10_H_
