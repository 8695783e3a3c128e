#include "storage/dataset_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/file_lock.h"
#include "common/printable.h"
#include "storage/shard_format.h"

namespace sluice {
namespace {

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

absl::Status Refuse(const std::string& path, absl::string_view what, const std::string& dir,
                    absl::string_view how) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", Printable(path), " is a file of the ",
                                                 "dataset in ", Printable(dir), how,
                                                 ": it would replace it"));
}

}  // namespace

bool IsDatasetFileName(absl::string_view name) {
  return absl::EndsWith(name, kShardSuffix) || absl::EndsWith(name, kManifestSuffix) ||
         name == FileLock::kFileName;
}

std::string ResolvedDatasetDir(const std::string& data) {
  char buf[PATH_MAX];
  struct stat st;
  const bool is_dir = ::stat(data.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (::realpath((is_dir ? data : DirName(data)).c_str(), buf) == nullptr) return "";
  return buf;
}

std::string ResolvedOutputPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(DirName(path).c_str(), buf) == nullptr) return path;
  return JoinPath(buf, BaseName(path));
}

absl::Status CheckNotADatasetFile(const std::string& path, const std::string& data,
                                  absl::string_view what) {
  const std::string dir = ResolvedDatasetDir(data);
  if (dir.empty()) return absl::OkStatus();
  const std::string out = ResolvedOutputPath(path);
  if (IsDatasetFileName(BaseName(out))) {
    // The same directory by its path or, spelled through a bind mount, by its inode.
    struct stat out_dir, data_dir;
    if (DirName(out) == dir ||
        (::stat(DirName(out).c_str(), &out_dir) == 0 && ::stat(dir.c_str(), &data_dir) == 0 &&
         SameFile(out_dir, data_dir))) {
      return Refuse(path, what, dir, "");
    }
  }
  // Another name of one of its files (a hard link, a symbolic link): the same device and inode.
  struct stat target;
  if (::stat(path.c_str(), &target) != 0 || !S_ISREG(target.st_mode)) return absl::OkStatus();
  std::unique_ptr<DIR, int (*)(DIR*)> entries(::opendir(dir.c_str()), &::closedir);
  if (entries == nullptr) return absl::OkStatus();
  while (const dirent* entry = ::readdir(entries.get())) {
    const std::string name = entry->d_name;
    struct stat st;
    if (IsDatasetFileName(name) && ::stat(JoinPath(dir, name).c_str(), &st) == 0 &&
        SameFile(st, target)) {
      return Refuse(path, what, dir, absl::StrCat(" (another name of ", Printable(name), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
