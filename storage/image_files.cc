#include "storage/image_files.h"

#include <sys/stat.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>

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
#include "common/printable.h"
#include "common/status_macros.h"
#include "storage/file_identity.h"
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
    return absl::NotFoundError(
        absl::StrCat(Printable(dir.string()), ": cannot list (", ec.message(), ")"));
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    // Its own error code: a broken symbolic link has no type (stat fails), and is listed as a
    // file (a bad image, named later), not a failure to list the folder.
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      if (folders != nullptr) folders->push_back(name);
    } else if (files != nullptr) {
      files->push_back(name);
    }
  }
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat(Printable(dir.string()), ": cannot list (", ec.message(), ")"));
  }
  if (folders != nullptr) std::sort(folders->begin(), folders->end());
  if (files != nullptr) std::sort(files->begin(), files->end());
  return absl::OkStatus();
}

// A file's or folder's identity: stat(2)'s device and inode, links followed.
using FileId = std::pair<uint64_t, uint64_t>;

FileId IdOf(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

// What a file that is not a regular file is, for messages.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

// One ImageFolder walk: every folder visited, by identity, and the folders from DIR down to
// the one being listed. The identities, not the paths, end the walk: a link back to a folder
// above (a loop) would otherwise be followed until the kernel's limit of 40 links per path
// (one file listed 41 times), and two such links double the paths at every level (a hang).
struct FolderWalk {
  fs::path base;
  std::string dir;                        // DIR as given, for messages
  std::map<FileId, std::string> visited;  // folder -> its first path relative to DIR ("": DIR)
  std::vector<FileId> chain;              // DIR, then each folder down to the current one
};

std::string WalkPath(const FolderWalk& w, const std::string& relative) {
  return Printable(relative.empty() ? w.dir : JoinPath(w.dir, relative));
}

// " (a symbolic link to \"<target>\")" when `path` is a link, else "".
std::string LinkNote(const std::string& path) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(path, ec);
  if (ec) return "";
  return absl::StrCat(" (a symbolic link to ", QuotedPrintable(target.string()), ")");
}

// Every folder under `relative` (itself included), as paths relative to DIR, in walk order
// (the caller sorts them: the order of sorted(os.walk(root, followlinks=True))).
absl::Status WalkFolders(FolderWalk* w, const std::string& relative,
                         std::vector<std::string>* out) {
  const std::string path = JoinPath(w->dir, relative);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(Printable(path), ": cannot list (", std::strerror(errno), ")"));
  }
  const FileId id = IdOf(st);
  if (auto seen = w->visited.find(id); seen != w->visited.end()) {
    if (std::find(w->chain.begin(), w->chain.end(), id) != w->chain.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Printable(path), LinkNote(path), " leads back to ", WalkPath(*w, seen->second),
          ", a folder that contains it: a loop, whose files would be listed again at every "
          "level; remove the link (a link to a folder outside ",
          Printable(w->dir), " is followed once)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        Printable(path), LinkNote(path), " is the same folder as ", WalkPath(*w, seen->second),
        ", reached a second time: its files would be listed twice; remove one of the two"));
  }
  // w->chain holds DIR and the folders above this one: its size is this folder's level.
  if (w->chain.size() > static_cast<size_t>(kMaxFolderDepth)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Printable(path), ": more than ", kMaxFolderDepth, " folders below ", Printable(w->dir),
        " (the deepest an image folder is walked, docs/limits.md); move the images up"));
  }
  w->visited.emplace(id, relative);
  out->push_back(relative);
  std::vector<std::string> sub;
  RETURN_IF_ERROR(ListSorted(w->base / relative, &sub, nullptr));
  w->chain.push_back(id);
  for (const std::string& s : sub) RETURN_IF_ERROR(WalkFolders(w, relative + "/" + s, out));
  w->chain.pop_back();
  return absl::OkStatus();
}

// Why `path`, which stat(2) cannot follow (errno `err`), is not an image when it is a symbolic
// link whose target is missing (or a link loop); "" when it is no link (a missing file, which
// ReadImageFiles names as an error).
std::string BrokenLinkReason(const std::string& path, int err) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return "";
  std::error_code ec;
  const fs::path target = fs::read_symlink(path, ec);
  return absl::StrCat("is a broken symbolic link to ", ec ? "?" : Printable(target.string()), " (",
                      std::strerror(err), "), expected a JPEG or PNG file");
}

// Looks at every file of `list` with stat(2) (links followed, nothing opened, so a FIFO never
// blocks): fills list->not_regular, and refuses two entries that are one file, which would be
// read twice (and a held-out split could share it with the training split). A broken symbolic
// link is a bad image; a file stat cannot find otherwise is left to ReadImageFiles, which names
// it.
absl::Status IdentifyFiles(ImageList* list) {
  const size_t n = list->paths.size();
  list->not_regular.assign(n, std::string());
  SameFileFinder same;
  for (size_t i = 0; i < n; ++i) {
    struct stat st;
    if (::stat(list->paths[i].c_str(), &st) != 0) {
      list->not_regular[i] = BrokenLinkReason(list->paths[i], errno);
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      list->not_regular[i] = absl::StrCat("is not a regular file (", FileKind(st.st_mode),
                                          "), expected a JPEG or PNG file");
    }
    same.Add(i, st);
  }
  return same.Check(list->names,
                    "a dataset holds each file once (read twice, it would count double, and a "
                    "held-out split could share it with training): remove one of them");
}

// Parses one line of an image list file: "<path><sep><label>".
absl::Status ParseListLine(absl::string_view line, const std::string& where,
                           const std::string& list_dir, ImageList* list) {
  const size_t sep = line.find_last_of(", \t");
  uint32_t label = 0;
  if (sep == absl::string_view::npos ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(sep + 1)), &label)) {
    // Spaces and tabs separate too, so one after the label leaves an empty label: say so.
    const bool trailing = !line.empty() && (line.back() == ' ' || line.back() == '\t');
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", QuotedPrintable(line), ": expected \"<path>,<label>\" with a label in [0, ",
        kMaxLabel, "]",
        trailing ? " (the line ends in a space or tab after its label: spaces and tabs "
                   "separate a path from its label, so the label read was empty)"
                 : ""));
  }
  if (label > kMaxLabel) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": label ", label, ": the largest label is ", kMaxLabel,
                     " (2^31 - 2: num_classes, the largest label + 1, is at most 2^31 - 1)"));
  }
  // The separator: a ',' (spaces or tabs after it belong to it), or a run of spaces and tabs.
  // Nothing else is trimmed: the path is used exactly as written, so "x.jpg ,0" names the file
  // "x.jpg " (trimmed, it silently read another file, "x.jpg").
  size_t end = sep;
  if (line[sep] != ',') {
    while (end > 0 && (line[end - 1] == ' ' || line[end - 1] == '\t')) --end;
    if (end > 0 && line[end - 1] == ',') --end;
  }
  const absl::string_view path = line.substr(0, end);
  const absl::string_view trimmed = absl::StripAsciiWhitespace(path);
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no path before the label"));
  }
  auto resolve = [&](absl::string_view p) {
    return absl::StartsWith(p, "/") ? std::string(p) : JoinPath(list_dir, p);
  };
  if (trimmed.size() != path.size()) {
    struct stat st;
    if (::lstat(resolve(path).c_str(), &st) != 0 && ::stat(resolve(trimmed).c_str(), &st) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", QuotedPrintable(path), " does not exist, but ", QuotedPrintable(trimmed),
          " does: a listed path is used exactly as written, spaces included (remove the spaces "
          "around the path)"));
    }
  }
  list->names.push_back(absl::StrCat(where, ": ", Printable(path)));
  list->sources.push_back(ManifestName(path));
  list->paths.push_back(resolve(path));
  list->labels.push_back(label);
  return absl::OkStatus();
}

// An Env error about file i under the file's name, without the path the Env put first (the
// name already says which file: printed twice, it read "a.jpg: a.jpg: ...").
absl::Status FileError(const ImageList& list, size_t i, const absl::Status& s) {
  absl::string_view message = s.message();
  absl::ConsumePrefix(&message, absl::StrCat(list.paths[i], ": "));
  return absl::Status(s.code(), absl::StrCat(list.names[i], ": ", message));
}

// Reads `path` whole. A read shorter than the size stat(2) gave is a bad image, its reason in
// `*short_read`: a kernel file (/proc, /sys) says 4096 bytes and holds a line, and a file cut
// while it is read ends early. Other errors (a file removed, no permission) are errors.
absl::StatusOr<std::string> ReadImageBytes(Env* env, const std::string& path,
                                           std::string* short_read) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  std::string out(file->Size(), '\0');
  ASSIGN_OR_RETURN(const size_t n, file->Read(0, out.size(), out.data()));
  if (n != out.size()) {
    *short_read = absl::StrCat("read ", n, " bytes of the ", out.size(),
                               " its size says (a kernel file, as in /proc or /sys, or a file cut "
                               "while read), expected a JPEG or PNG file");
    out.clear();
  }
  return out;
}

void NoteIgnored(ImageList* list, std::string what) {
  if (list->ignored_files++ < kNamedExamples) list->ignored_examples.push_back(std::move(what));
}

}  // namespace

absl::StatusOr<ImageList> ListImageFolder(const std::string& dir) {
  FolderWalk walk;
  walk.base = fs::path(dir);
  walk.dir = dir;
  const fs::path& base = walk.base;
  ImageList list;
  std::vector<std::string> top_files;
  RETURN_IF_ERROR(ListSorted(base, &list.class_names, &top_files));
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(Printable(dir), ": cannot list (", std::strerror(errno), ")"));
  }
  walk.visited.emplace(IdOf(st), "");
  walk.chain.push_back(IdOf(st));
  // The manifest holds the names as UTF-8 (label.classes).
  std::vector<std::string> class_folders = list.class_names;
  for (std::string& name : list.class_names) name = ManifestName(name);
  // A valid UTF-8 name is kept as it is and another one escaped: a folder literally named
  // "caf\xe9" and a Latin-1 "caf<E9>" would be recorded as one class (and their files under
  // one source name). Refused, naming both.
  {
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < list.class_names.size(); ++i) {
      const auto [it, inserted] = seen.emplace(list.class_names[i], i);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            Printable(dir), ": class folders ", Printable(class_folders[it->second]), " and ",
            Printable(class_folders[i]), " would both be recorded as class \"",
            Printable(list.class_names[i]),
            "\" (a name that is not UTF-8 is written with \\xNN escapes): rename one"));
      }
    }
  }
  for (const std::string& f : top_files) {
    NoteIgnored(&list, absl::StrCat(Printable(f), ": not in a class folder (DIR/<class>/...)"));
  }
  if (list.class_names.empty()) {
    return absl::NotFoundError(
        absl::StrCat(Printable(dir),
                     ": no class folder (expected DIR/<class>/<image files>, as torchvision's "
                     "ImageFolder)"));
  }
  std::vector<std::string> empty_classes;
  for (uint32_t label = 0; label < list.class_names.size(); ++label) {
    std::vector<std::string> folders;
    RETURN_IF_ERROR(WalkFolders(&walk, class_folders[label], &folders));
    std::sort(folders.begin(), folders.end());
    const size_t before = list.paths.size();
    for (const std::string& folder : folders) {
      std::vector<std::string> files;
      RETURN_IF_ERROR(ListSorted(base / folder, nullptr, &files));
      for (const std::string& f : files) {
        const std::string relative = folder + "/" + f;
        if (!HasImageExtension(f)) {
          NoteIgnored(&list, absl::StrCat(Printable(relative), ": no image extension"));
          continue;
        }
        list.paths.push_back(JoinPath(dir, relative));
        list.names.push_back(Printable(list.paths.back()));
        list.sources.push_back(ManifestName(relative));
        list.labels.push_back(label);
      }
    }
    if (list.paths.size() == before) empty_classes.push_back(Printable(class_folders[label]));
  }
  if (!empty_classes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Printable(dir), ": no image file in class folder(s) ", absl::StrJoin(empty_classes, ", "),
        " (names ending in ", absl::StrJoin(kImageExtensions, " "), ", any case)"));
  }
  RETURN_IF_ERROR(IdentifyFiles(&list));
  return list;
}

absl::StatusOr<ImageList> ReadImageListFile(Env* env, const std::string& list_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, list_path));
  ImageList list;
  const std::string list_dir = DirName(list_path);
  const std::string shown = Printable(list_path);
  absl::string_view body = text;
  // Windows editors start UTF-8 text with a byte-order mark; Python's "utf-8-sig" skips it, and
  // so does this (kept, it would be an invisible start of the first path).
  absl::ConsumePrefix(&body, "\xEF\xBB\xBF");
  if (absl::StartsWith(body, "\xFF\xFE") || absl::StartsWith(body, "\xFE\xFF")) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, ": starts with a UTF-16 byte-order mark; expected UTF-8 text (save it as UTF-8)"));
  }
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    ++line_number;
    const std::string where = absl::StrCat(shown, ":", line_number);
    if (const size_t nul = line.find('\0'); nul != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": a NUL byte at column ", nul + 1,
                       "; expected a text line \"<path>,<label>\" (no path holds a NUL)"));
    }
    absl::ConsumeSuffix(&line, "\r");
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    RETURN_IF_ERROR(ParseListLine(line, where, list_dir, &list));
  }
  if (list.paths.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": no records (expected lines \"<path>,<label>\")"));
  }
  RETURN_IF_ERROR(IdentifyFiles(&list));
  return list;
}

absl::StatusOr<ImageRecords> ReadImageFiles(Env* env, const ImageList& list,
                                            const ReadImagesOptions& options) {
  const size_t n = list.paths.size();
  auto not_regular = [&](size_t i) {
    return i < list.not_regular.size() && !list.not_regular[i].empty();
  };
  std::vector<std::string> bad(n);  // why file i is a bad image (its size, structure...), or empty
  // The files are held in memory, and their frames again before the shards are written: check
  // both fit before reading (a missing file is named here too). A file over the 2^28 bytes of
  // one sample is refused from its size here and never read (a 1 GB file starting FF D8 FF
  // used to be read whole before the writer refused it).
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    if (not_regular(i)) continue;
    absl::StatusOr<uint64_t> size = env->GetFileSize(list.paths[i]);
    if (!size.ok()) return FileError(list, i, size.status());
    if (absl::Status s = CheckImageFileSize(*size); !s.ok()) {
      bad[i] = std::string(s.message());
      continue;
    }
    total_bytes += *size;
  }
  RETURN_IF_ERROR(CheckMemory(
      absl::StrCat(n, " image files of ", FormatBytes(total_bytes), ", held twice while sharding"),
      2 * total_bytes));
  std::vector<std::string> bytes(n);
  std::vector<absl::Status> errors(n);
  std::atomic<uint64_t> done{0};
  tbb::task_arena arena(options.threads > 0 ? options.threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t i = r.begin(); i != r.end(); ++i) {
        if (not_regular(i)) {
          // Known from stat, never opened: a FIFO's open would wait for a writer.
          bad[i] = list.not_regular[i];
        } else if (!bad[i].empty()) {
          // Refused from its size above: not read.
        } else if (absl::StatusOr<std::string> b = ReadImageBytes(env, list.paths[i], &bad[i]);
                   !b.ok()) {
          errors[i] = FileError(list, i, b.status());
        } else if (!bad[i].empty()) {
          // Shorter than its size: not an image file.
        } else {
          bytes[i] = std::move(*b);
          absl::StatusOr<ImageStructure> checked = CheckImageStructure(bytes[i]);
          // The declared size before any decode: a 69-byte PNG may declare 60000x60000, and it
          // would set the split's bound (the preprocess scratch) for the whole training run.
          if (checked.ok()) {
            if (absl::Status s = CheckDeclaredPixels(*checked, options.max_image_pixels); !s.ok()) {
              checked = s;
            }
          }
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
        absl::StrCat("holdout fraction ", ExactNumber(fraction), ": expected in (0, 1)"));
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
        absl::StrCat("holdout fraction ", ExactNumber(fraction), " of ", n, " files leaves ",
                     out.kept.samples.empty() ? "no file to keep" : "no file held out",
                     " (the split is by a hash of each path, not an exact count)"));
  }
  return out;
}

}  // namespace sluice
