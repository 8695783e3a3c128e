// sluice-shard: IDX, .npy and CIFAR-10 files, and folders or lists of JPEG/PNG files -> shard
// datasets -> IDX (docs/formats/shard.md).
//
//   sluice-shard create (--images F --labels F [--layout NHWC|NCHW] | --cifar10 DIR|FILES |
//                        --image-folder DIR | --image-list FILE)
//                       --out DIR [--split NAME] [--num-classes K] [--records-per-shard N]
//                       [--records-per-frame M] [--zstd-level L] [--threads T]
//                       [--frame-bytes B] [--codec none|zstd] [--skip-bad-images]
//                       [--verify-images structure|decode]
//                       [--holdout-fraction F [--holdout-split NAME]]
//   sluice-shard inspect PATH          a manifest, a dataset directory or a .shard file
//   sluice-shard verify DIR            every manifest in DIR (or one manifest file)
//   sluice-shard export DIR --out PREFIX [--split NAME]
//   sluice-shard --help | --helpfull | --version
//
// Flags follow tools/tool_flags.h: --records-per-shard or --records_per_shard, "=value" or the
// next argument; each subcommand accepts only the flags it reads.
// Exit codes: 0 success, 1 data error (bad or missing input, corrupt shard, I/O), 2 usage error.
// Only main() turns a Status into an exit code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/env.h"
#include "common/limits.h"
#include "common/progress.h"
#include "common/status_macros.h"
#include "pipeline/transforms/decode_check.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"
#include "storage/dataset_writer.h"
#include "storage/frame_view.h"
#include "storage/idx.h"
#include "storage/image_files.h"
#include "storage/record_files.h"
#include "storage/shard_reader.h"
#include "tools/sluice_shard_inspect.h"
#include "tools/tool_flags.h"

// The flags of every subcommand; CheckCommand refuses those a subcommand does not read.
ABSL_FLAG(std::string, images, "", "create: the images file: IDX (raw or .gz) or NumPy .npy");
ABSL_FLAG(std::string, labels, "", "create: the labels file, in the images file's format");
ABSL_FLAG(std::string, layout, "", "create: NHWC or NCHW, the layout of 4-D .npy images");
ABSL_FLAG(std::string, cifar10, "",
          "create: CIFAR-10 binary batches: a directory or a comma-separated file list");
ABSL_FLAG(std::string, image_folder, "",
          "create: JPEG/PNG files in class subfolders (torchvision's ImageFolder layout)");
ABSL_FLAG(std::string, image_list, "",
          "create: a list file of JPEG/PNG files, one \"<path>,<label>\" per line");
ABSL_FLAG(int64_t, frame_bytes, sluice::kDefaultFrameBytes,
          "create, encoded images: close a frame at this many raw bytes (1..2^31)");
ABSL_FLAG(std::string, codec, "none", "create, encoded images: frame codec, none or zstd");
ABSL_FLAG(bool, skip_bad_images, false,
          "create, encoded images: skip (count and name) empty, non-JPEG/PNG and truncated "
          "files instead of failing");
ABSL_FLAG(std::string, verify_images, "structure",
          "create, encoded images: structure (check each file's markers or chunks, cheap) or "
          "decode (also decode each file as training does, in parallel)");
ABSL_FLAG(double, holdout_fraction, 0,
          "create, encoded images: hold out about this fraction of the files (0 < F < 1) as "
          "split --holdout-split, chosen by a hash of each file's path (0: none)");
ABSL_FLAG(std::string, holdout_split, "test", "create, with --holdout-fraction: its split's name");
ABSL_FLAG(int64_t, num_classes, 0,
          "create: the class count (0: the largest label + 1; CIFAR-10: 10); labels outside "
          "[0, K) are refused");
ABSL_FLAG(std::string, out, "", "create: the dataset directory; export: the output prefix");
ABSL_FLAG(std::string, split, "train", "The split's name");
ABSL_FLAG(int64_t, records_per_shard, 16384, "create: records per shard file");
ABSL_FLAG(int64_t, records_per_frame, 256, "create: records per zstd frame");
ABSL_FLAG(int64_t, zstd_level, 3, "create: zstd compression level (1..22)");
ABSL_FLAG(int64_t, threads, 0, "create: threads (0: all cores; at most 4 x the hardware threads)");
ABSL_FLAG(bool, quiet, false, "create: no progress line");

namespace sluice {
namespace {

constexpr char kUsage[] =
    R"(usage: sluice-shard <command> ...
  create (--images F --labels F [--layout NHWC|NCHW] | --cifar10 DIR|F1,F2,... |
          --image-folder DIR | --image-list FILE) --out DIR
         [--split NAME] [--num-classes K] [--records-per-shard N]
         [--records-per-frame M] [--zstd-level L] [--threads T] [--quiet]
         [--frame-bytes B] [--codec none|zstd] [--skip-bad-images]
         [--verify-images structure|decode] [--holdout-fraction F [--holdout-split NAME]]
      (--threads: 0 = all cores, at most 4 x the hardware threads)
      IDX files (raw or .gz), NumPy .npy files (docs/formats/npy.md; --layout for 4-D
      images) or CIFAR-10 batches (a directory: data_batch_*.bin, or test_batch.bin for
      --split test); or JPEG/PNG files stored as they are (shard version 2): class
      subfolders as torchvision's ImageFolder (classes sorted by name, recorded in the
      manifest), or a list file of "<path>,<label>" lines; frames close at M records or
      --frame-bytes raw bytes (default 4 MiB), --codec none by default; an empty,
      non-JPEG/PNG or truncated file (a structure check, docs/formats/shard.md) is an error
      naming it, or skipped and named with --skip-bad-images (--verify-images=decode also
      decodes every file as training does, finding damaged pixel data); each record's file is
      recorded -> DIR/<split>-NNNNN-<xxh3>.shard + DIR/<split>.manifest.json;
      --holdout-fraction F (JPEG/PNG input) also writes split NAME (default test) of the
      files whose path hashes below F (about F of them; adding files moves no other file);
      labels must lie in [0, K) (K: --num-classes, else the largest label + 1);
      a rewrite replaces an existing split only once the new one is complete; one writer
      per DIR at a time (DIR/.sluice.lock names the holder)
  inspect PATH          print a manifest, every split of a dataset directory, or a .shard
                        file's layout
  verify DIR            check every checksum and count of every split in DIR; warn about
                        files no manifest lists (*.tmp and unlisted <split>-*.shard files:
                        leftovers of an interrupted write, removed by the next write)
  export DIR --out PREFIX [--split NAME]
      a split back to raw IDX: PREFIX-images-idx3-ubyte, PREFIX-labels-idx1-ubyte, after
      the checks verify makes of that split (nothing is written if one fails)
exit codes: 0 ok, 1 data error, 2 usage error
)";

ToolDescription ShardTool() {
  return {.name = "sluice-shard",
          .usage = absl::StrCat("IDX, .npy, CIFAR-10 files <-> shard datasets "
                                "(docs/formats/shard.md).\n",
                                absl::StripTrailingAsciiWhitespace(kUsage)),
          .source_name = "sluice_shard",
          .main_flags = {"images", "labels", "layout", "cifar10", "image_folder", "image_list",
                         "num_classes", "out", "split", "records_per_shard", "records_per_frame",
                         "zstd_level", "threads", "quiet", "frame_bytes", "codec",
                         "skip_bad_images", "holdout_fraction", "holdout_split"}};
}

// A subcommand: how many path arguments it takes and which flags it reads.
struct Command {
  const char* name;
  size_t paths;
  std::set<std::string> flags;
};

const Command* FindCommand(const std::string& name) {
  static const Command kCommands[] = {
      {"create",
       0,
       {"images",
        "labels",
        "layout",
        "cifar10",
        "image_folder",
        "image_list",
        "num_classes",
        "out",
        "split",
        "records_per_shard",
        "records_per_frame",
        "zstd_level",
        "threads",
        "quiet",
        "frame_bytes",
        "codec",
        "skip_bad_images",
        "holdout_fraction",
        "holdout_split",
        "verify_images"}},
      {"inspect", 1, {}},
      {"verify", 1, {}},
      {"export", 1, {"out", "split"}},
  };
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

// The subcommand of a parsed command line, with its path arguments; a flag the subcommand does
// not read is refused. Usage errors are kInvalidArgument; Main() maps them to exit code 2.
absl::StatusOr<const Command*> CheckCommand(const ToolCommandLine& command_line) {
  if (command_line.positional.empty()) return absl::InvalidArgumentError("missing command");
  const std::string& name = command_line.positional[0];
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command \"", name, "\", expected create, inspect, verify or export"));
  }
  for (const std::string& flag : command_line.flags) {
    if (command->flags.count(flag) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": unknown flag --", DashedFlagName(flag)));
    }
  }
  const size_t paths = command_line.positional.size() - 1;
  if (paths != command->paths) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected ", command->paths, " path argument(s), got ", paths));
  }
  return command;
}

// The value of a string flag the command needs.
absl::StatusOr<std::string> RequiredFlag(const std::string& command,
                                         const absl::Flag<std::string>& flag, const char* name) {
  std::string value = absl::GetFlag(flag);
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(command, ": --", name, " is required"));
  }
  return value;
}

absl::StatusOr<int64_t> IntInRange(const std::string& command, const absl::Flag<int64_t>& flag,
                                   const char* name, int64_t lo, int64_t hi) {
  const int64_t v = absl::GetFlag(flag);
  if (v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        command, ": --", name, " \"", v, "\": expected an integer in [", lo, ", ", hi, "]"));
  }
  return v;
}

// Options of `create`, checked before any file is touched so bad values are usage errors.
struct CreateOptions {
  std::string images, labels, cifar10, image_folder, image_list, out, split;
  bool skip_bad_images = false;
  bool verify_by_decoding = false;  // --verify-images=decode
  double holdout_fraction = 0;      // 0: no held-out split
  std::string holdout_split;
  std::optional<ArrayLayout> layout;
  std::optional<uint64_t> num_classes;
  WriteDatasetOptions write;
  bool quiet = false;
};

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
  if (!images && (frame_bytes != kDefaultFrameBytes || *codec != FrameCodec::kNone ||
                  absl::GetFlag(FLAGS_skip_bad_images))) {
    return absl::InvalidArgumentError(
        "create: --frame-bytes, --codec and --skip-bad-images apply to --image-folder and "
        "--image-list input (fixed-size records are zstd frames of M records)");
  }
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
      return absl::InvalidArgumentError(absl::StrCat(
          "create: --holdout-fraction \"", o->holdout_fraction, "\": expected a number in (0, 1)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CreateOptions> CreateOptionsFromFlags() {
  CreateOptions o;
  RETURN_IF_ERROR(InputFromFlags(&o));
  ASSIGN_OR_RETURN(o.out, RequiredFlag("create", FLAGS_out, "out"));
  o.split = absl::GetFlag(FLAGS_split);
  if (o.split.empty() || absl::StrContains(o.split, '/')) {
    return absl::InvalidArgumentError("create: --split: expected a plain name such as train");
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
  if (o.holdout_fraction > 0 &&
      (o.holdout_split.empty() || absl::StrContains(o.holdout_split, '/') ||
       o.holdout_split == o.split)) {
    return absl::InvalidArgumentError(
        "create: --holdout-split: expected a plain name other than --split's, such as test");
  }
  o.quiet = absl::GetFlag(FLAGS_quiet);
  return o;
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

// The records of --image-folder or --image-list, read in parallel.
absl::StatusOr<ImageRecords> ReadImageInput(Env* env, const CreateOptions& o, ImageList* list) {
  if (!o.image_folder.empty()) {
    ASSIGN_OR_RETURN(*list, ListImageFolder(o.image_folder));
  } else {
    ASSIGN_OR_RETURN(*list, ReadImageListFile(env, o.image_list));
  }
  Progress progress(absl::StrCat("read ", o.split), list->paths.size(), "files");
  uint64_t shown = 0;
  absl::Mutex mu;
  ReadImagesOptions read;
  read.threads = o.write.threads;
  read.skip_bad_images = o.skip_bad_images;
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
      JoinPath(o.out, ManifestFileName(split)).c_str(),
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
  const std::string input = o.image_folder.empty() ? o.image_list : o.image_folder;
  std::optional<uint64_t> classes = o.num_classes;
  if (!list.class_names.empty()) {
    if (classes && *classes != list.class_names.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          input, ": ", list.class_names.size(), " class folders, but --num-classes ", *classes));
    }
    classes = list.class_names.size();
  }
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
    RETURN_IF_ERROR(WriteImageSplit(env, o, o.split, parts.kept, start));
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

// Files in a dataset directory that no manifest names: a warning line each on stderr. *.tmp
// files are leftovers of an interrupted write; a "<split>-*.shard" of a verified split that its
// manifest does not list is an error (a stale or misplaced shard). The lock file is ignored.
absl::Status ReportExtraFiles(const std::string& dir, const std::vector<std::string>& children,
                              const std::vector<std::unique_ptr<Dataset>>& datasets) {
  std::set<std::string> known = {".sluice.lock"};
  for (const auto& ds : datasets) {
    known.insert(BaseName(ds->manifest_path()));
    for (const ShardEntry& e : ds->manifest().shards) known.insert(e.file);
  }
  std::vector<std::string> sorted = children;
  std::sort(sorted.begin(), sorted.end());
  for (const std::string& c : sorted) {
    if (known.count(c) > 0) continue;
    const std::string p = JoinPath(dir, c);
    if (absl::EndsWith(c, ".tmp")) {
      std::fprintf(stderr,
                   "sluice-shard verify: warning: %s: leftover of an interrupted write (in no "
                   "manifest; safe to delete while no writer holds the directory)\n",
                   p.c_str());
      continue;
    }
    const Dataset* owner = nullptr;
    for (const auto& ds : datasets) {
      if (absl::StartsWith(c, ds->manifest().split + "-") && absl::EndsWith(c, kShardSuffix)) {
        owner = ds.get();
      }
    }
    if (owner != nullptr) {
      // A warning, not a failure: a rewrite that crashed before its manifest switch leaves
      // its new shards behind while the old split stays valid (the next write removes them).
      std::fprintf(stderr,
                   "sluice-shard verify: warning: %s: looks like a shard of split \"%s\" but %s "
                   "does not list it (a leftover of an interrupted rewrite; the next write of "
                   "the split removes it)\n",
                   p.c_str(), owner->manifest().split.c_str(), owner->manifest_path().c_str());
      continue;
    }
    std::fprintf(stderr,
                 "sluice-shard verify: warning: %s: unexpected file, in no split's manifest\n",
                 p.c_str());
  }
  return absl::OkStatus();
}

absl::Status RunVerify(Env* env, const std::string& path) {
  std::vector<std::string> manifests;
  std::vector<std::string> children_list;
  const bool is_dir = !absl::EndsWith(path, kManifestSuffix);
  if (!is_dir) {
    manifests.push_back(path);
  } else {
    auto children = env->GetChildren(path);
    if (!children.ok()) {
      return absl::NotFoundError(
          absl::StrCat(path, ": expected a dataset directory (", children.status().message(), ")"));
    }
    for (const std::string& c : *children) {
      if (absl::EndsWith(c, kManifestSuffix)) manifests.push_back(JoinPath(path, c));
    }
    if (manifests.empty()) {
      return absl::NotFoundError(absl::StrCat(path, ": no *", kManifestSuffix,
                                              " (not a dataset, or its writing did not finish)"));
    }
    std::sort(manifests.begin(), manifests.end());
    children_list = std::move(*children);
  }
  std::vector<std::unique_ptr<Dataset>> datasets;
  for (const std::string& mp : manifests) {
    ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds,
                     Dataset::Open(env, mp, "train", ShardFiles::kOneAtATime));
    RETURN_IF_ERROR(VerifyDataset(*ds));
    std::printf("OK %s: %llu records in %zu shards, every checksum and count verified\n",
                mp.c_str(), static_cast<unsigned long long>(ds->record_count()),
                ds->manifest().shards.size());
    datasets.push_back(std::move(ds));
  }
  std::fflush(stdout);
  if (is_dir) RETURN_IF_ERROR(ReportExtraFiles(path, children_list, datasets));
  return absl::OkStatus();
}

absl::Status RunExport(Env* env, const std::string& path, const std::string& prefix,
                       const std::string& split) {
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds, Dataset::Open(env, path, split));
  // ReadAllRecords checks each frame's checksum as it decodes; VerifyDataset adds what `verify`
  // checks beyond that (header fields, sizes, the manifest's whole-file xxh3 of every shard).
  // Both run before any output file is written.
  ASSIGN_OR_RETURN(RecordArrays records, ReadAllRecords(*ds));
  RETURN_IF_ERROR(VerifyDataset(*ds));
  ASSIGN_OR_RETURN(IdxPaths paths, WriteIdxPair(env, prefix, records));
  std::printf("%s -> %s, %s (%llu records, raw IDX)\n", ds->manifest_path().c_str(),
              paths.images.c_str(), paths.labels.c_str(),
              static_cast<unsigned long long>(records.count));
  return absl::OkStatus();
}

int ReportUsageError(const absl::Status& error) {
  std::fprintf(stderr, "sluice-shard: usage error: %s\n%s", std::string(error.message()).c_str(),
               kUsage);
  return 2;
}

// Runs one subcommand whose command line is checked; a Status from the libraries is a data error.
absl::Status RunCommand(const std::string& command, const std::vector<std::string>& positional,
                        CreateOptions create_options) {
  Env* env = Env::Default();
  if (command == "create") return RunCreate(env, std::move(create_options));
  if (command == "inspect") return RunInspect(env, positional[1]);
  if (command == "verify") return RunVerify(env, positional[1]);
  return RunExport(env, positional[1], absl::GetFlag(FLAGS_out), absl::GetFlag(FLAGS_split));
}

int Main(int argc, char** argv) {
  absl::StatusOr<ToolCommandLine> command_line = ParseToolCommandLine(ShardTool(), argc, argv);
  if (!command_line.ok()) return ReportUsageError(command_line.status());
  if (command_line->help_printed) return 0;
  if (command_line->positional.size() == 1 && command_line->positional[0] == "help") {
    PrintToolHelp(ShardTool());
    return 0;
  }
  absl::StatusOr<const Command*> command = CheckCommand(*command_line);
  if (!command.ok()) return ReportUsageError(command.status());
  const std::string name = (*command)->name;
  CreateOptions create_options;
  if (name == "create") {
    absl::StatusOr<CreateOptions> o = CreateOptionsFromFlags();
    if (!o.ok()) return ReportUsageError(o.status());
    create_options = *std::move(o);
  } else if (name == "export") {
    absl::StatusOr<std::string> out = RequiredFlag(name, FLAGS_out, "out");
    if (!out.ok()) return ReportUsageError(out.status());
  }
  if (absl::Status status = RunCommand(name, command_line->positional, std::move(create_options));
      !status.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "sluice-shard %s: error: %s\n", name.c_str(),
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // A last resort: every failure should already be a Status; an exception that still escapes
  // (bad_alloc, length_error) ends with one line and exit code 1, not std::terminate.
  try {
    return sluice::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "sluice-shard: error: %s (unexpected exception; please report it)\n",
                 e.what());
    return 1;
  }
}
