// sluice-shard create: the options checked from the flags, and the write of the dataset.
#include "tools/sluice_shard_create.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "pipeline/transforms/decode_check.h"
#include "storage/dataset_files.h"
#include "storage/dataset_writer.h"
#include "storage/image_files.h"
#include "storage/record_files.h"
#include "storage/shard_format.h"
#include "tools/sluice_shard_flags.h"

namespace sluice {
namespace {

// The input files: --images and --labels (with --layout), --cifar10, --image-folder or
// --image-list; and --num-classes.
absl::Status InputFromFlags(CreateOptions* o) {
  o->cifar10 = absl::GetFlag(FLAGS_cifar10);
  o->image_folder = absl::GetFlag(FLAGS_image_folder);
  o->image_list = absl::GetFlag(FLAGS_image_list);
  const int inputs = !o->cifar10.empty() + !o->image_folder.empty() + !o->image_list.empty() +
                     (!absl::GetFlag(FLAGS_images).empty() || !absl::GetFlag(FLAGS_labels).empty());
  if (inputs > 1) {
    return absl::InvalidArgumentError(
        "create: give one input: --images and --labels, --cifar10, --image-folder or "
        "--image-list");
  }
  if (!o->image_folder.empty() || !o->image_list.empty()) {
    if (!absl::GetFlag(FLAGS_layout).empty()) {
      return absl::InvalidArgumentError("create: --layout applies to .npy images only");
    }
  } else if (o->cifar10.empty()) {
    ASSIGN_OR_RETURN(o->images, RequiredFlag("create", FLAGS_images, "images"));
    ASSIGN_OR_RETURN(o->labels, RequiredFlag("create", FLAGS_labels, "labels"));
  } else if (!absl::GetFlag(FLAGS_images).empty() || !absl::GetFlag(FLAGS_labels).empty() ||
             !absl::GetFlag(FLAGS_layout).empty()) {
    return absl::InvalidArgumentError(
        "create: --cifar10 holds images and labels; give it without --images, --labels, --layout");
  }
  if (const std::string layout = absl::GetFlag(FLAGS_layout); !layout.empty()) {
    ASSIGN_OR_RETURN(o->layout, ParseArrayLayout(layout, "create: --layout"));
  }
  ASSIGN_OR_RETURN(int64_t classes,
                   IntInRange("create", FLAGS_num_classes, "num-classes", 0, INT32_MAX));
  if (classes > 0) o->num_classes = static_cast<uint64_t>(classes);
  return absl::OkStatus();
}

// --frame-bytes, --codec and --skip-bad-images: for JPEG/PNG input only.
absl::Status EncodedOptionsFromFlags(CreateOptions* o) {
  ShardingOptions& s = o->write.sharding;
  const bool images = !o->image_folder.empty() || !o->image_list.empty();
  ASSIGN_OR_RETURN(int64_t frame_bytes, IntInRange("create", FLAGS_frame_bytes, "frame-bytes", 1,
                                                   static_cast<int64_t>(kMaxFrameBytes)));
  absl::StatusOr<FrameCodec> codec = ParseFrameCodec(absl::GetFlag(FLAGS_codec));
  if (!codec.ok())
    return absl::InvalidArgumentError(absl::StrCat("create: --codec: ", codec.status().message()));
  ASSIGN_OR_RETURN(int64_t max_pixels,
                   IntInRange("create", FLAGS_max_image_pixels, "max-image-pixels", 0, INT64_MAX));
  if (!images && (frame_bytes != kDefaultFrameBytes || *codec != FrameCodec::kNone ||
                  absl::GetFlag(FLAGS_skip_bad_images) ||
                  static_cast<uint64_t>(max_pixels) != kDefaultMaxImagePixels)) {
    return absl::InvalidArgumentError(
        "create: --frame-bytes, --codec, --skip-bad-images and --max-image-pixels apply to "
        "--image-folder and --image-list input (fixed-size records are zstd frames of M "
        "records)");
  }
  o->max_image_pixels = static_cast<uint64_t>(max_pixels);
  s.frame_bytes = static_cast<uint32_t>(frame_bytes);
  s.codec = *codec;
  o->skip_bad_images = absl::GetFlag(FLAGS_skip_bad_images);
  const std::string verify = absl::GetFlag(FLAGS_verify_images);
  if (verify != "structure" && verify != "decode") {
    return absl::InvalidArgumentError(
        absl::StrCat("create: --verify-images \"", verify, "\": expected structure or decode"));
  }
  if (verify == "decode" && !images) {
    return absl::InvalidArgumentError(
        "create: --verify-images applies to --image-folder and --image-list input");
  }
  o->verify_by_decoding = verify == "decode";
  o->holdout_fraction = absl::GetFlag(FLAGS_holdout_fraction);
  o->holdout_split = absl::GetFlag(FLAGS_holdout_split);
  if (o->holdout_fraction != 0) {
    if (!images) {
      return absl::InvalidArgumentError(
          "create: --holdout-fraction applies to --image-folder and --image-list input");
    }
    if (!(o->holdout_fraction > 0 && o->holdout_fraction < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("create: --holdout-fraction \"",
                                                     ExactNumber(o->holdout_fraction),
                                                     "\": expected a number in (0, 1)"));
    }
  }
  return absl::OkStatus();
}

// The progress callback of a write: called from many threads with a growing total; forwards
// only the increase.
std::function<void(uint64_t)> ProgressForwarder(Progress* progress, absl::Mutex* mu,
                                                uint64_t* shown) {
  return [=](uint64_t total) {
    absl::MutexLock l(mu);
    if (total > *shown) {
      progress->Add(total - *shown);
      *shown = total;
    }
  };
}

// u8 labels declare at most 256 classes: with more (--num-classes, or class folders), the labels
// the reader picked as u8 are stored as i32, so --num-classes 1000 is not refused for u8 labels
// the tool chose itself.
void WidenLabelsFor(std::optional<uint64_t> classes, EncodedRecords* records) {
  if (!classes || *classes <= 256 || records->label_dtype != LabelDType::kU8) return;
  std::string wide(records->labels.size() * 4, '\0');
  for (size_t i = 0; i < records->labels.size(); ++i) {
    EncodeFixed32(&wide[4 * i], static_cast<uint8_t>(records->labels[i]));
  }
  records->labels = std::move(wide);
  records->label_dtype = LabelDType::kI32;
}

// The records of --image-folder or --image-list, read in parallel.
absl::StatusOr<ImageRecords> ReadImageInput(Env* env, const CreateOptions& o, ImageList* list) {
  if (!o.image_folder.empty()) {
    ASSIGN_OR_RETURN(*list, ListImageFolder(o.image_folder));
  } else {
    ASSIGN_OR_RETURN(*list, ReadImageListFile(env, o.image_list));
  }
  // A file of the dataset --out holds (a shard, a manifest, a temporary, by any spelling or
  // link) would be replaced, or removed as a leftover, by the write it feeds: refused as the
  // --images and --cifar10 inputs are (tools/sluice_shard.cc), before any file is read.
  if (const size_t i = FirstDatasetFile(list->paths, o.out); i < list->paths.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        list->names[i], " is a file of the dataset --out ", Printable(o.out),
        " writes: the write would replace or remove it (move it out of ", Printable(o.out), ")"));
  }
  Progress progress(absl::StrCat("read ", o.split), list->paths.size(), "files");
  uint64_t shown = 0;
  absl::Mutex mu;
  ReadImagesOptions read;
  read.threads = o.write.threads;
  read.skip_bad_images = o.skip_bad_images;
  read.max_image_pixels = o.max_image_pixels;
  if (o.verify_by_decoding) read.extra_check = DecodeCheck;
  read.on_progress = ProgressForwarder(&progress, &mu, &shown);
  ASSIGN_OR_RETURN(ImageRecords images, ReadImageFiles(env, *list, read));
  progress.Finish();
  return images;
}

// "<headline>:" then one indented line per named file and "... and N more" for the rest;
// nothing when count is 0.
void PrintLeftOut(const std::string& headline, uint64_t count,
                  const std::vector<std::string>& examples) {
  if (count == 0) return;
  std::printf("%s:\n", headline.c_str());
  for (const std::string& e : examples) std::printf("  %s\n", e.c_str());
  if (count > examples.size()) {
    std::printf("  ... and %llu more\n", static_cast<unsigned long long>(count - examples.size()));
  }
}

// Writes one split of JPEG/PNG records and prints its summary line.
absl::Status WriteImageSplit(Env* env, CreateOptions o, const std::string& split,
                             const EncodedRecords& records,
                             std::chrono::steady_clock::time_point start) {
  Progress progress(absl::StrCat("create ", split), records.samples.size(), "records");
  uint64_t shown = 0;
  absl::Mutex mu;
  o.write.on_progress = ProgressForwarder(&progress, &mu, &shown);
  ASSIGN_OR_RETURN(Manifest m, WriteEncodedDataset(env, o.out, split, records, o.write));
  progress.Finish();
  uint64_t stored = 0, bytes = 0;
  for (const ShardEntry& e : m.shards) stored += e.bytes;
  for (const std::string& s : records.samples) bytes += s.size();
  std::printf(
      "%s: %llu images (encoding %s) in %zu shards, %llu image bytes -> %llu bytes in "
      "shard files, %.2fs\n",
      Printable(JoinPath(o.out, ManifestFileName(split))).c_str(),
      static_cast<unsigned long long>(m.record_count),
      std::string(SampleEncodingName(m.spec.encoding)).c_str(), m.shards.size(),
      static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(stored),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

// create from JPEG/PNG files: version 2 shards of the files' bytes.
absl::Status RunCreateImages(Env* env, CreateOptions o) {
  const auto start = std::chrono::steady_clock::now();
  Progress::SetEnabled(!o.quiet);
  ImageList list;
  ASSIGN_OR_RETURN(ImageRecords images, ReadImageInput(env, o, &list));
  if (images.records.samples.empty() && images.skipped > 0) {
    // Said here, not as the writer's "zero records": every file was read, and every one bad.
    PrintLeftOut(absl::StrCat("skipped ", images.skipped, " bad image files (--skip-bad-images)"),
                 images.skipped, images.skipped_examples);
    std::fflush(stdout);
    return absl::InvalidArgumentError(absl::StrCat(
        Printable(o.image_folder.empty() ? o.image_list : o.image_folder), ": all ", images.skipped,
        images.skipped == 1 ? " file was" : " files were",
        " skipped as bad images (see above); nothing to write to split ", Printable(o.split)));
  }
  const std::string input = Printable(o.image_folder.empty() ? o.image_list : o.image_folder);
  std::optional<uint64_t> classes = o.num_classes;
  if (!list.class_names.empty()) {
    if (classes && *classes != list.class_names.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          input, ": ", list.class_names.size(), " class folders, but --num-classes ", *classes));
    }
    classes = list.class_names.size();
  }
  WidenLabelsFor(classes, &images.records);
  absl::StatusOr<uint32_t> checked = CheckLabels(images.records, classes);
  if (!checked.ok()) {
    return absl::Status(checked.status().code(),
                        absl::StrCat(input, ": ", checked.status().message()));
  }
  o.write.num_classes = *checked;
  o.write.class_names = list.class_names;
  if (!o.image_list.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, o.image_list));
    o.write.sources = {{"list", BaseName(o.image_list), text.size(), Xxh3(text)}};
  }
  if (o.holdout_fraction > 0) {
    ASSIGN_OR_RETURN(HeldOutRecords parts, HoldOut(std::move(images.records), o.holdout_fraction));
    // A pair: the old held-out split goes before the new --split is written, so an
    // interruption between the two writes leaves no held-out split rather than the old one,
    // which shares files with the new --split (docs/formats/shard.md, "Held-out split").
    CreateOptions first = o;
    first.write.remove_split_first = o.holdout_split;
    RETURN_IF_ERROR(WriteImageSplit(env, std::move(first), o.split, parts.kept, start));
    RETURN_IF_ERROR(WriteImageSplit(env, o, o.holdout_split, parts.held_out, start));
  } else {
    RETURN_IF_ERROR(WriteImageSplit(env, o, o.split, images.records, start));
  }
  PrintLeftOut(absl::StrCat("ignored ", list.ignored_files, " files (not read)"),
               list.ignored_files, list.ignored_examples);
  PrintLeftOut(absl::StrCat("skipped ", images.skipped, " bad image files (--skip-bad-images)"),
               images.skipped, images.skipped_examples);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CreateOptions> CreateOptionsFromFlags() {
  CreateOptions o;
  RETURN_IF_ERROR(InputFromFlags(&o));
  ASSIGN_OR_RETURN(o.out, RequiredFlag("create", FLAGS_out, "out"));
  o.split = absl::GetFlag(FLAGS_split);
  if (absl::Status named = CheckSplitName(o.split); !named.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("create: --split: ", named.message()));
  }

  ShardingOptions& s = o.write.sharding;
  ASSIGN_OR_RETURN(int64_t rps, IntInRange("create", FLAGS_records_per_shard, "records-per-shard",
                                           1, INT64_MAX));
  ASSIGN_OR_RETURN(int64_t rpf, IntInRange("create", FLAGS_records_per_frame, "records-per-frame",
                                           1, UINT32_MAX));
  ASSIGN_OR_RETURN(int64_t level, IntInRange("create", FLAGS_zstd_level, "zstd-level", 1, 22));
  ASSIGN_OR_RETURN(int64_t threads,
                   IntInRange("create", FLAGS_threads, "threads", 0, MaxThreads()));
  s.records_per_shard = static_cast<uint64_t>(rps);
  s.records_per_frame = static_cast<uint32_t>(rpf);
  s.zstd_level = static_cast<int>(level);
  o.write.threads = static_cast<int>(threads);
  RETURN_IF_ERROR(EncodedOptionsFromFlags(&o));
  if (o.holdout_fraction > 0) {
    if (absl::Status named = CheckSplitName(o.holdout_split); !named.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("create: --holdout-split: ", named.message()));
    }
  }
  if (o.holdout_fraction > 0 && o.holdout_split == o.split) {
    return absl::InvalidArgumentError(
        "create: --holdout-split: expected a plain name other than --split's, such as test");
  }
  o.quiet = absl::GetFlag(FLAGS_quiet);
  return o;
}

absl::Status RunCreate(Env* env, CreateOptions o) {
  if (!o.image_folder.empty() || !o.image_list.empty()) return RunCreateImages(env, std::move(o));
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(RecordInput in, o.cifar10.empty()
                                       ? ReadImageLabelFiles(env, o.images, o.labels, o.layout)
                                       : ReadCifar10Files(env, o.cifar10, o.split));
  std::optional<uint64_t> classes = o.num_classes;
  if (!classes && in.num_classes) classes = *in.num_classes;
  absl::StatusOr<uint32_t> checked = CheckLabels(in.records, classes);
  if (!checked.ok()) {
    return absl::Status(
        checked.status().code(),
        absl::StrCat(o.cifar10.empty() ? o.labels : o.cifar10, ": ", checked.status().message()));
  }
  o.write.num_classes = *checked;
  Progress::SetEnabled(!o.quiet);
  Progress progress(absl::StrCat("create ", o.split), in.records.count, "records");
  uint64_t shown = 0;
  absl::Mutex mu;
  o.write.on_progress = ProgressForwarder(&progress, &mu, &shown);
  o.write.sources = in.sources;
  ASSIGN_OR_RETURN(Manifest m, WriteDataset(env, o.out, o.split, in.records, o.write));
  progress.Finish();
  uint64_t stored = 0;
  for (const ShardEntry& e : m.shards) stored += e.bytes;
  const uint64_t raw = in.records.count * in.records.spec.record_bytes();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %llu records in %zu shards, %llu raw bytes -> %llu bytes (ratio %.2f), %.2fs\n",
              JoinPath(o.out, ManifestFileName(o.split)).c_str(),
              static_cast<unsigned long long>(m.record_count), m.shards.size(),
              static_cast<unsigned long long>(raw), static_cast<unsigned long long>(stored),
              static_cast<double>(raw) / stored, secs);
  return absl::OkStatus();
}

}  // namespace sluice
