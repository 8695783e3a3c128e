#include "storage/cifar10.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/array_layout.h"
#include "storage/file_identity.h"
#include "storage/internal/input_buffer.h"

namespace sluice {
namespace {

constexpr absl::string_view kReadTwice =
    "a split holds each batch once (read twice, its records would be in the split twice): "
    "remove one of them";

std::vector<std::string> PrintableNames(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  names.reserve(paths.size());
  for (const std::string& p : paths) names.push_back(Printable(p));
  return names;
}

}  // namespace

absl::Status CheckCifar10Size(const std::string& path, uint64_t bytes) {
  if (bytes != 0 && bytes % kCifar10RecordBytes == 0) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat(path, ": ", bytes, " bytes, not a positive multiple of ", kCifar10RecordBytes,
                   " (a CIFAR-10 record: 1 label byte then 3,072 pixel bytes, CHW 3x32x32)"));
}

absl::StatusOr<RecordArrays> ParseCifar10(
    const std::vector<std::pair<std::string, absl::string_view>>& files) {
  if (files.empty()) return absl::InvalidArgumentError("CIFAR-10: no batch files given");
  RecordArrays r;
  for (const auto& [path, bytes] : files) {
    RETURN_IF_ERROR(CheckCifar10Size(path, bytes.size()));
    r.count += bytes.size() / kCifar10RecordBytes;
  }
  r.spec.sample_dtype = SampleDType::kU8;
  r.spec.label_dtype = LabelDType::kU8;
  r.spec.height = kCifar10Side;
  r.spec.width = kCifar10Side;
  r.spec.channels = kCifar10Channels;
  const std::string& first = files.front().first;
  RETURN_IF_ERROR(storage_internal::ResizeForInput(&r.samples, r.count * kCifar10PixelBytes, first,
                                                   "the CIFAR-10 samples"));
  RETURN_IF_ERROR(
      storage_internal::ResizeForInput(&r.labels, r.count, first, "the CIFAR-10 labels"));
  uint64_t next = 0;
  for (const auto& [path, bytes] : files) {
    for (size_t off = 0; off < bytes.size(); off += kCifar10RecordBytes, ++next) {
      r.labels[next] = bytes[off];
      TransposeChwToHwc(bytes.data() + off + 1, r.samples.data() + next * kCifar10PixelBytes, 1,
                        kCifar10Channels, kCifar10Side, kCifar10Side, 1);
    }
  }
  return r;
}

absl::StatusOr<std::vector<std::string>> Cifar10Files(Env* env, const std::string& spec,
                                                      const std::string& split) {
  absl::StatusOr<std::vector<std::string>> children = env->GetChildren(spec);
  if (!children.ok()) {
    // Not a directory: a list of files (each checked when read).
    std::vector<std::string> files = absl::StrSplit(spec, ',', absl::SkipEmpty());
    RETURN_IF_ERROR(RefuseSameFiles(files, PrintableNames(files), kReadTwice));
    return files;
  }
  std::vector<std::pair<int, std::string>> batches;
  for (absl::string_view name : *children) {
    if (split == "test") {
      if (name == "test_batch.bin") batches.emplace_back(0, std::string(name));
      continue;
    }
    const std::string file(name);
    if (!absl::ConsumePrefix(&name, "data_batch_") || !absl::ConsumeSuffix(&name, ".bin")) {
      continue;
    }
    // CIFAR-10 ships data_batch_1.bin ... data_batch_5.bin: a number of plain digits in
    // [1, kCifar10TrainBatches]. Another data_batch_*.bin ("-1", "+3", a number past int) was
    // read as a batch it is not, or left out without a word: refused, naming it.
    const bool digits = !name.empty() && std::all_of(name.begin(), name.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    int number = 0;
    if (!digits || !absl::SimpleAtoi(name, &number) || number < 1 ||
        number > static_cast<int>(kCifar10TrainBatches)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Printable(JoinPath(spec, file)),
          ": not a CIFAR-10 batch name (expected data_batch_1.bin ", "... data_batch_",
          kCifar10TrainBatches,
          ".bin, as CIFAR-10 ships); rename or move it, or list the files to read with "
          "--cifar10 F1,F2,..."));
    }
    batches.emplace_back(number, file);
  }
  if (batches.empty()) {
    return absl::NotFoundError(absl::StrCat(
        spec, ": no CIFAR-10 batches for split \"", split, "\" (expected ",
        split == "test" ? "test_batch.bin" : "data_batch_1.bin ... data_batch_5.bin", ")"));
  }
  std::sort(batches.begin(), batches.end());
  std::vector<std::string> files;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (i > 0 && batches[i].first == batches[i - 1].first) {
      // data_batch_01.bin and data_batch_1.bin: both would be read as batch 1.
      return absl::InvalidArgumentError(
          absl::StrCat(Printable(JoinPath(spec, batches[i - 1].second)), " and ",
                       Printable(JoinPath(spec, batches[i].second)), " are both batch ",
                       batches[i].first, " (data_batch_", batches[i].first,
                       ".bin); a split holds each batch once: remove one "
                       "of them"));
    }
    files.push_back(JoinPath(spec, batches[i].second));
  }
  RETURN_IF_ERROR(RefuseSameFiles(files, PrintableNames(files), kReadTwice));
  return files;
}

}  // namespace sluice
