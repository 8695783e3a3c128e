#include "storage/dataset_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "common/file_lock.h"
#include "common/printable.h"
#include "storage/file_identity.h"
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
  // A writer's temporaries ("<file>.tmp", renamed over the file; a leftover one is removed)
  // are the dataset's too: an input of that name would be consumed by the write it feeds.
  absl::ConsumeSuffix(&name, ".tmp");
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

size_t FirstDatasetFile(const std::vector<std::string>& paths, const std::string& data) {
  const std::string dir = ResolvedDatasetDir(data);
  if (dir.empty()) return paths.size();
  struct stat data_dir;
  if (::stat(dir.c_str(), &data_dir) != 0) return paths.size();
  // The identities of the directory's dataset files, read once.
  std::set<FileIdentity> files;
  std::unique_ptr<DIR, int (*)(DIR*)> entries(::opendir(dir.c_str()), &::closedir);
  while (entries != nullptr) {
    const dirent* entry = ::readdir(entries.get());
    if (entry == nullptr) break;
    struct stat st;
    if (IsDatasetFileName(entry->d_name) &&
        ::stat(JoinPath(dir, entry->d_name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      files.insert(IdentityOf(st));
    }
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    // By name: a dataset file's name in the dataset's directory, however the path spells it
    // (resolved only for such names).
    if (IsDatasetFileName(BaseName(path))) {
      const std::string out = ResolvedOutputPath(path);
      struct stat out_dir;
      if (DirName(out) == dir ||
          (::stat(DirName(out).c_str(), &out_dir) == 0 && SameFile(out_dir, data_dir))) {
        return i;
      }
    }
    // By identity: another name (a hard or symbolic link) of one of its files.
    struct stat target;
    if (!files.empty() && ::stat(path.c_str(), &target) == 0 && S_ISREG(target.st_mode) &&
        files.count(IdentityOf(target)) > 0) {
      return i;
    }
  }
  return paths.size();
}

absl::Status CheckNotAnInputFile(const std::string& path, const std::string& input,
                                 absl::string_view what, absl::string_view input_what) {
  struct stat in, out;
  const bool same_identity = ::stat(input.c_str(), &in) == 0 && ::stat(path.c_str(), &out) == 0 &&
                             S_ISREG(out.st_mode) && IdentityOf(out) == IdentityOf(in);
  if (!same_identity && ResolvedOutputPath(path) != ResolvedOutputPath(input)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(what, " ", Printable(path), " is ", input_what,
                                                 " the run reads (", Printable(input),
                                                 "): it would replace it"));
}

absl::Status CheckNotACacheFile(const std::string& path, const std::string& cache_dir,
                                absl::string_view what) {
  char buf[PATH_MAX];
  if (::realpath(cache_dir.c_str(), buf) == nullptr) return absl::OkStatus();
  const std::string dir = buf;
  std::unique_ptr<DIR, int (*)(DIR*)> entries(::opendir(dir.c_str()), &::closedir);
  if (entries == nullptr) return absl::OkStatus();
  const std::string out = ResolvedOutputPath(path);
  struct stat target;
  const bool exists = ::stat(path.c_str(), &target) == 0 && S_ISREG(target.st_mode);
  while (const dirent* entry = ::readdir(entries.get())) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string sub = JoinPath(dir, name);
    struct stat st;
    if (::stat(sub.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (name != "ceilings") {
      // A dataset sharded from IDX input: its manifest, shards and lock.
      if (absl::Status s = CheckNotADatasetFile(path, sub, what); !s.ok()) return s;
      continue;
    }
    // The measured ceilings: every <key>.json there, by name or by identity.
    const bool named = DirName(out) == sub && absl::EndsWith(out, ".json");
    bool linked = false;
    if (exists && !named) {
      std::unique_ptr<DIR, int (*)(DIR*)> files(::opendir(sub.c_str()), &::closedir);
      while (files != nullptr && !linked) {
        const dirent* f = ::readdir(files.get());
        if (f == nullptr) break;
        struct stat fs;
        linked = ::stat(JoinPath(sub, f->d_name).c_str(), &fs) == 0 && S_ISREG(fs.st_mode) &&
                 IdentityOf(fs) == IdentityOf(target);
      }
    }
    if (named || linked) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", Printable(path), " is a measured-ceilings file of the cache in ",
                       Printable(dir), ": it would replace it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
