// sluice-shard: IDX, .npy and CIFAR-10 files, and folders or lists of JPEG/PNG files -> shard
// datasets -> IDX (docs/formats/shard.md).
//
//   sluice-shard create (--images F --labels F [--layout NHWC|NCHW] | --cifar10 DIR|FILES |
//                        --image-folder DIR | --image-list FILE)
//                       --out DIR [--split NAME] [--num-classes K] [--records-per-shard N]
//                       [--records-per-frame M] [--zstd-level L] [--threads T]
//                       [--frame-bytes B] [--codec none|zstd] [--skip-bad-images]
//                       [--verify-images structure|decode] [--max-image-pixels P]
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
//
// This file is the command line: every flag, the usage text, the command table and main. Each
// command's work has its own file pair: sluice_shard_create (the create options and the write),
// sluice_shard_inspect, sluice_shard_verify (verify and export).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "common/output_target.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/dataset_files.h"
#include "storage/image_structure.h"
#include "storage/remote/remote_env.h"
#include "storage/shard_format.h"
#include "tools/sluice_shard_create.h"
#include "tools/sluice_shard_flags.h"
#include "tools/sluice_shard_inspect.h"
#include "tools/sluice_shard_verify.h"
#include "tools/stdout_output.h"
#include "tools/tool_flags.h"

// The flags of every subcommand (declared in tools/sluice_shard_flags.h for the commands' files);
// CheckCommand refuses those a subcommand does not read.
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
ABSL_FLAG(int64_t, max_image_pixels, sluice::kDefaultMaxImagePixels,
          "create, encoded images: refuse (or skip, with --skip-bad-images) a file whose header "
          "declares more than this many pixels, width x height (default: PIL's "
          "Image.MAX_IMAGE_PIXELS; 0: no bound)");
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

namespace {

constexpr char kUsage[] =
    R"(usage: sluice-shard <command> ...
  create (--images F --labels F [--layout NHWC|NCHW] | --cifar10 DIR|F1,F2,... |
          --image-folder DIR | --image-list FILE) --out DIR
         [--split NAME] [--num-classes K] [--records-per-shard N]
         [--records-per-frame M] [--zstd-level L] [--threads T] [--quiet]
         [--frame-bytes B] [--codec none|zstd] [--skip-bad-images]
         [--verify-images structure|decode] [--max-image-pixels P]
         [--holdout-fraction F [--holdout-split NAME]]
      (--threads: 0 = all cores, at most 4 x the hardware threads)
      IDX files (raw or .gz), NumPy .npy files (docs/formats/npy.md; --layout for 4-D
      images) or CIFAR-10 batches (a directory: data_batch_*.bin, or test_batch.bin for
      --split test); or JPEG/PNG files stored as they are (shard version 2): class
      subfolders as torchvision's ImageFolder (classes sorted by name, recorded in the
      manifest), or a list file of "<path>,<label>" lines (each path used exactly as
      written, spaces included); frames close at M records or
      --frame-bytes raw bytes (default 4 MiB), --codec none by default; an empty,
      non-JPEG/PNG or truncated file (a structure check, docs/formats/shard.md) is an error
      naming it, or skipped and named with --skip-bad-images (--verify-images=decode also
      decodes every file as training does, finding damaged pixel data); so is a file over
      2^28 bytes (refused from its size, unread) or whose header declares more than
      --max-image-pixels pixels (default 89478485, PIL's Image.MAX_IMAGE_PIXELS; 0: no
      bound); each record's file is
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
      the checks verify makes of that split (nothing is written if one fails); DIR may
      be a manifest; without --split, DIR's train split or its only split; a --split
      that DIR does not hold is an error listing the splits there
exit codes: 0 ok, 1 data error, 2 usage error
)";

ToolDescription ShardTool() {
  return {.name = "sluice-shard",
          .usage = absl::StrCat("IDX, .npy, CIFAR-10 files <-> shard datasets "
                                "(docs/formats/shard.md).\n",
                                absl::StripTrailingAsciiWhitespace(kUsage)),
          .source_name = "sluice_shard",
          .main_flags = {"images",
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
                         "max_image_pixels",
                         "holdout_fraction",
                         "holdout_split"}};
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
        "max_image_pixels",
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
    return absl::InvalidArgumentError(absl::StrCat("unknown command ", QuotedPrintable(name),
                                                   ", expected create, inspect, verify or export"));
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

int ReportUsageError(const absl::Status& error) {
  std::fprintf(stderr, "sluice-shard: usage error: %s\n%s", TerminalSafe(error.message()).c_str(),
               kUsage);
  return 2;
}

// Runs one subcommand whose command line is checked; a Status from the libraries is a data error.
// `split_given`: --split was on the command line (export: a split asked for by name).
absl::Status RunCommand(const std::string& command, const std::vector<std::string>& positional,
                        CreateOptions create_options, bool split_given) {
  // Datasets may be URLs (docs/storage.md). inspect and verify read the store itself, never the
  // local cache of an earlier run: verify checks what a run would fetch.
  remote::RemoteOptions remote_options;
  remote_options.cache_bytes = 0;
  remote::ConfigureRemote(remote_options);
  Env* env = remote::UrlEnv();
  if (command == "create") {
    // Before any input is read: a file, a FIFO or a socket at --out fails now.
    RETURN_IF_ERROR(ProbeOutputDirectory(create_options.out, "out"));
    // An input that is a manifest, shard or lock of --out (by any spelling or link) would be
    // replaced, or removed as a leftover, by the write it feeds.
    std::vector<std::pair<const char*, std::string>> inputs = {
        {"images", create_options.images},
        {"labels", create_options.labels},
        {"image-list", create_options.image_list}};
    for (absl::string_view f : absl::StrSplit(create_options.cifar10, ',', absl::SkipEmpty())) {
      inputs.push_back({"cifar10", std::string(f)});
    }
    for (const auto& [flag, input] : inputs) {
      if (input.empty()) continue;
      if (absl::Status s = CheckNotADatasetFile(input, create_options.out, ""); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " ", Printable(input), " is a file of the dataset --out ",
                         Printable(create_options.out), " writes: the write would replace it"));
      }
    }
    return RunCreate(env, std::move(create_options));
  }
  if (command == "inspect") return RunInspect(env, positional[1]);
  if (command == "verify") return RunVerify(env, positional[1]);
  return RunExport(env, positional[1], absl::GetFlag(FLAGS_out),
                   split_given ? absl::GetFlag(FLAGS_split) : "");
}

// `code`, or 1 with one line on stderr when what was printed on stdout did not all reach it
// (`> /dev/full`). `reader_gone_ok`: stdout was progress, not the output asked for.
int ExitAfterStdout(int code, bool reader_gone_ok) {
  const absl::Status s = FinishStdout(reader_gone_ok);
  if (s.ok() || code != 0) return code;
  std::fprintf(stderr, "sluice-shard: error: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  absl::StatusOr<ToolCommandLine> command_line = ParseToolCommandLine(ShardTool(), argc, argv);
  if (!command_line.ok()) return ReportUsageError(command_line.status());
  if (command_line->help_printed) return ExitAfterStdout(0, /*reader_gone_ok=*/false);
  if (command_line->positional.size() == 1 && command_line->positional[0] == "help") {
    PrintToolHelp(ShardTool());
    return ExitAfterStdout(0, /*reader_gone_ok=*/false);
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
  const bool split_given = std::find(command_line->flags.begin(), command_line->flags.end(),
                                     "split") != command_line->flags.end();
  if (absl::Status status =
          RunCommand(name, command_line->positional, std::move(create_options), split_given);
      !status.ok()) {
    std::fflush(stdout);
    // TerminalSafe: a path a library quoted unescaped cannot reach the terminal raw.
    std::fprintf(stderr, "sluice-shard %s: error: %s\n", name.c_str(),
                 TerminalSafe(status.message()).c_str());
    return 1;
  }
  // What inspect prints is the output asked for; the other commands print progress and a
  // summary, which a reader may stop reading (`| head`) without failing the command.
  return ExitAfterStdout(0, /*reader_gone_ok=*/name != "inspect");
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // A last resort: every failure should already be a Status; an exception that still escapes
  // (bad_alloc, length_error) ends with one line and exit code 1, not std::terminate.
  sluice::IgnoreBrokenPipes();  // a closed stdout is EPIPE, not the end before the outputs
  try {
    return sluice::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "sluice-shard: error: %s (unexpected exception; please report it)\n",
                 sluice::TerminalSafe(e.what()).c_str());
    return 1;
  }
}
