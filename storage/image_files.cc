#include "storage/image_files.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "storage/image_structure.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

// The length of the valid UTF-8 sequence at b[i] (RFC 3629: no overlong forms, surrogates or
// code points past U+10FFFF), or 0.
size_t Utf8SequenceLength(absl::string_view b, size_t i) {
  auto at = [&](size_t k) { return static_cast<uint8_t>(b[k]); };
  auto cont = [&](size_t k, uint8_t lo, uint8_t hi) {
    return k < b.size() && at(k) >= lo && at(k) <= hi;
  };
  const uint8_t c = at(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1, 0x80, 0xBF) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// `name` as the manifest (UTF-8 JSON) can hold it: unchanged when it is valid UTF-8; else
// each byte outside a valid sequence is written "\xNN" and each backslash doubled.
std::string ManifestName(absl::string_view name) {
  bool valid = true;
  for (size_t i = 0, n = 0; valid && i < name.size(); i += n) {
    n = Utf8SequenceLength(name, i);
    valid = n > 0;
  }
  if (valid) return std::string(name);
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const size_t n = Utf8SequenceLength(name, i);
    if (n == 0) {
      absl::StrAppend(&out, "\\x", absl::Hex(static_cast<uint8_t>(name[i]), absl::kZeroPad2));
      ++i;
    } else {
      out.append(name[i] == '\\' ? "\\\\" : std::string(name.substr(i, n)));
      i += n;
    }
  }
  return out;
}

bool HasImageExtension(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  return std::any_of(std::begin(kImageExtensions), std::end(kImageExtensions),
                     [&](const char* ext) { return absl::EndsWith(lower, ext); });
}

// The entries of `dir`, sorted by name, split into folders and non-folders (symbolic links
// followed, as os.walk(followlinks=True) and os.scandir's is_dir()).
absl::Status ListSorted(const fs::path& dir, std::vector<std::string>* folders,
                        std::vector<std::string>* files) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat(dir.string(), ": cannot list (", ec.message(), ")"));
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec)) {
      if (folders != nullptr) folders->push_back(name);
    } else if (files != nullptr) {
      files->push_back(name);
    }
  }
  if (ec) {
    return absl::NotFoundError(absl::StrCat(dir.string(), ": cannot list (", ec.message(), ")"));
  }
  if (folders != nullptr) std::sort(folders->begin(), folders->end());
  if (files != nullptr) std::sort(files->begin(), files->end());
  return absl::OkStatus();
}

// Every folder under `root` (itself included), as paths relative to the dataset folder, sorted
// as strings: the order of sorted(os.walk(root)).
absl::Status WalkFolders(const fs::path& base, const std::string& root,
                         std::vector<std::string>* out) {
  out->push_back(root);
  std::vector<std::string> sub;
  RETURN_IF_ERROR(ListSorted(base / root, &sub, nullptr));
  for (const std::string& s : sub) RETURN_IF_ERROR(WalkFolders(base, root + "/" + s, out));
  return absl::OkStatus();
}

// Parses one line of an image list file: "<path><sep><label>".
absl::Status ParseListLine(absl::string_view line, const std::string& where,
                           const std::string& list_dir, ImageList* list) {
  const size_t sep = line.find_last_of(", \t");
  uint32_t label = 0;
  if (sep == absl::string_view::npos ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(sep + 1)), &label) ||
      label > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": \"", line, "\": expected \"<path>,<label>\" with a label in [0, 2^31 - 1]"));
  }
  absl::string_view path = absl::StripTrailingAsciiWhitespace(line.substr(0, sep));
  absl::ConsumeSuffix(&path, ",");
  path = absl::StripAsciiWhitespace(path);
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no path before the label"));
  }
  list->names.push_back(absl::StrCat(where, ": ", path));
  list->sources.push_back(ManifestName(path));
  list->paths.push_back(absl::StartsWith(path, "/") ? std::string(path) : JoinPath(list_dir, path));
  list->labels.push_back(label);
  return absl::OkStatus();
}

void NoteIgnored(ImageList* list, std::string what) {
  if (list->ignored_files++ < kNamedExamples) list->ignored_examples.push_back(std::move(what));
}

}  // namespace

absl::StatusOr<ImageList> ListImageFolder(const std::string& dir) {
  const fs::path base(dir);
  ImageList list;
  std::vector<std::string> top_files;
  RETURN_IF_ERROR(ListSorted(base, &list.class_names, &top_files));
  // The manifest holds the names as UTF-8 (label.classes).
  std::vector<std::string> class_folders = list.class_names;
  for (std::string& name : list.class_names) name = ManifestName(name);
  for (const std::string& f : top_files) {
    NoteIgnored(&list, absl::StrCat(f, ": not in a class folder (DIR/<class>/...)"));
  }
  if (list.class_names.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir,
                     ": no class folder (expected DIR/<class>/<image files>, as torchvision's "
                     "ImageFolder)"));
  }
  std::vector<std::string> empty_classes;
  for (uint32_t label = 0; label < list.class_names.size(); ++label) {
    std::vector<std::string> folders;
    RETURN_IF_ERROR(WalkFolders(base, class_folders[label], &folders));
    std::sort(folders.begin(), folders.end());
    const size_t before = list.paths.size();
    for (const std::string& folder : folders) {
      std::vector<std::string> files;
      RETURN_IF_ERROR(ListSorted(base / folder, nullptr, &files));
      for (const std::string& f : files) {
        const std::string relative = folder + "/" + f;
        if (!HasImageExtension(f)) {
          NoteIgnored(&list, absl::StrCat(relative, ": no image extension"));
          continue;
        }
        list.paths.push_back(JoinPath(dir, relative));
        list.names.push_back(list.paths.back());
        list.sources.push_back(ManifestName(relative));
        list.labels.push_back(label);
      }
    }
    if (list.paths.size() == before) empty_classes.push_back(list.class_names[label]);
  }
  if (!empty_classes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": no image file in class folder(s) ", absl::StrJoin(empty_classes, ", "),
                     " (names ending in ", absl::StrJoin(kImageExtensions, " "), ", any case)"));
  }
  return list;
}

absl::StatusOr<ImageList> ReadImageListFile(Env* env, const std::string& list_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, list_path));
  ImageList list;
  const std::string list_dir = DirName(list_path);
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::ConsumeSuffix(&line, "\r");
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    RETURN_IF_ERROR(
        ParseListLine(line, absl::StrCat(list_path, ":", line_number), list_dir, &list));
  }
  if (list.paths.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(list_path, ": no records (expected lines \"<path>,<label>\")"));
  }
  return list;
}

absl::StatusOr<ImageRecords> ReadImageFiles(Env* env, const ImageList& list,
                                            const ReadImagesOptions& options) {
  const size_t n = list.paths.size();
  // The files are held in memory, and their frames again before the shards are written: check
  // both fit before reading (a missing file is named here too).
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<uint64_t> size = env->GetFileSize(list.paths[i]);
    if (!size.ok()) {
      return absl::Status(size.status().code(),
                          absl::StrCat(list.names[i], ": ", size.status().message()));
    }
    total_bytes += *size;
  }
  RETURN_IF_ERROR(CheckMemory(
      absl::StrCat(n, " image files of ", FormatBytes(total_bytes), ", held twice while sharding"),
      2 * total_bytes));
  std::vector<std::string> bytes(n);
  std::vector<absl::Status> errors(n);
  std::vector<std::string> bad(n);  // why CheckImageStructure refused file i, or empty
  std::atomic<uint64_t> done{0};
  tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t i = r.begin(); i != r.end(); ++i) {
        absl::StatusOr<std::string> b = ReadFileToString(env, list.paths[i]);
        if (b.ok()) {
          bytes[i] = std::move(*b);
          absl::StatusOr<ImageStructure> checked = CheckImageStructure(bytes[i]);
          if (checked.ok() && options.extra_check) {
            if (absl::Status extra = options.extra_check(bytes[i]); !extra.ok()) {
              checked = extra;
            }
          }
          if (!checked.ok()) {
            bad[i] = std::string(checked.status().message());
            // macOS leaves "._<name>.jpg" metadata files beside the images: say so.
            if (absl::StartsWith(BaseName(list.paths[i]), ".")) {
              absl::StrAppend(&bad[i], " (a hidden file; \"._*\" files are macOS metadata)");
            }
          }
        } else {
          errors[i] = absl::Status(b.status().code(),
                                   absl::StrCat(list.names[i], ": ", b.status().message()));
        }
        const uint64_t total = done.fetch_add(1) + 1;
        if (options.on_progress) options.on_progress(total);
      }
    });
  });
  for (const absl::Status& e : errors) RETURN_IF_ERROR(e);  // the first in list order
  if (!options.skip_bad_images) {
    // Every bad file at once, so one pass finds them all: the first few named, then a count.
    std::vector<size_t> refused;
    for (size_t i = 0; i < n; ++i) {
      if (!bad[i].empty()) refused.push_back(i);
    }
    if (!refused.empty()) {
      std::string message = absl::StrCat(list.names[refused[0]], ": ", bad[refused[0]]);
      for (size_t k = 1; k < refused.size() && k < kNamedExamples; ++k) {
        absl::StrAppend(&message, "; ", list.names[refused[k]], ": ", bad[refused[k]]);
      }
      if (refused.size() > kNamedExamples) {
        absl::StrAppend(&message, "; and ", refused.size() - kNamedExamples, " more");
      }
      return absl::InvalidArgumentError(
          absl::StrCat(message, " (", refused.size(), refused.size() == 1 ? " file" : " files",
                       " refused; --skip-bad-images leaves such files out)"));
    }
  }

  ImageRecords out;
  const bool wide =
      std::any_of(list.labels.begin(), list.labels.end(), [](uint32_t l) { return l > 255; });
  out.records.label_dtype = wide ? LabelDType::kI32 : LabelDType::kU8;
  for (size_t i = 0; i < n; ++i) {
    if (!bad[i].empty()) {
      if (out.skipped++ < kNamedExamples) {
        out.skipped_examples.push_back(absl::StrCat(list.names[i], ": ", bad[i]));
      }
      continue;
    }
    out.records.samples.push_back(std::move(bytes[i]));
    out.records.names.push_back(list.names[i]);
    if (!list.sources.empty()) out.records.sources.push_back(list.sources[i]);
    if (wide) {
      PutFixed32(&out.records.labels, list.labels[i]);
    } else {
      out.records.labels.push_back(static_cast<char>(list.labels[i]));
    }
  }
  return out;
}

absl::StatusOr<HeldOutRecords> HoldOut(EncodedRecords records, double fraction) {
  if (!(fraction > 0 && fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("holdout fraction ", fraction, ": expected in (0, 1)"));
  }
  const size_t n = records.samples.size();
  if (records.sources.size() != n) {
    return absl::InvalidArgumentError("holdout: every record needs its source path");
  }
  const size_t label_bytes = LabelDTypeSize(records.label_dtype);
  HeldOutRecords out;
  out.kept.label_dtype = out.held_out.label_dtype = records.label_dtype;
  for (size_t i = 0; i < n; ++i) {
    // 2^-64 * hash is exact in a double up to rounding of the hash's low bits, the same on
    // every IEEE machine.
    const double u = static_cast<double>(Xxh3(records.sources[i])) * 0x1p-64;
    EncodedRecords& side = u < fraction ? out.held_out : out.kept;
    side.samples.push_back(std::move(records.samples[i]));
    side.labels.append(records.labels, i * label_bytes, label_bytes);
    if (!records.names.empty()) side.names.push_back(std::move(records.names[i]));
    side.sources.push_back(std::move(records.sources[i]));
  }
  if (out.kept.samples.empty() || out.held_out.samples.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("holdout fraction ", fraction, " of ", n, " files leaves ",
                     out.kept.samples.empty() ? "no file to keep" : "no file held out",
                     " (the split is by a hash of each path, not an exact count)"));
  }
  return out;
}

}  // namespace sluice
