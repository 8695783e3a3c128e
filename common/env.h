// Env: every file access of sluice goes through this interface, so tests can substitute
// in-memory files and failing files (common/testing/mem_env.h, fault_injection_env.h, in the
// sluice::testing target). Modeled on leveldb's Env.
//
// Errors: every method returns absl::Status; messages name the path and the operation.
//   kNotFound for a missing file, kResourceExhausted for ENOSPC/EDQUOT, kUnavailable for a lock
//   another holder has, kInternal otherwise (kDataLoss is reserved for content checks done by
//   callers).
// Ownership: Env::Default() is process-wide and never deleted; any other Env is owned by its
//   creator and must outlive every file it opened and every object that borrows it (Dataset,
//   Trainer, RunTrainJob, ...). Files are owned by their unique_ptr.
// Thread safety: Env implementations are thread safe. A RandomAccessFile may be read from
//   many threads at once; a WritableFile is used by one thread at a time.
#ifndef SLUICE_COMMON_ENV_H_
#define SLUICE_COMMON_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to `n` bytes at `offset` into `scratch`; returns the bytes read (fewer only at
  // end of file). Thread safe.
  virtual absl::StatusOr<size_t> Read(uint64_t offset, size_t n, char* scratch) const = 0;
  virtual uint64_t Size() const = 0;
  virtual const std::string& path() const = 0;
  // A hint that [offset, offset + n) will be read soon: a remote file starts fetching it
  // (storage/remote/remote_env.h); a local file ignores it. Thread safe.
  virtual void WillRead(uint64_t offset, size_t n) const {}
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  // Flushes to stable storage (fsync).
  virtual absl::Status Sync() = 0;
  virtual absl::Status Close() = 0;
};

// An exclusive lock on a file, taken by Env::LockFile (docs/formats/lock.md). Destroying it
// removes the file and then releases the lock.
class LockedFile {
 public:
  virtual ~LockedFile() = default;
  // Replaces the lock file's contents with `contents` (the holder's description).
  virtual absl::Status WriteContents(absl::string_view contents) = 0;
  virtual const std::string& path() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX environment. Never deleted.
  static Env* Default();

  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;
  // Creates or truncates `path`.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Creates `path` afresh for a write-then-rename: a leftover entry of that name (a crashed
  // writer's temporary, or a link someone planted) is removed first, and the new file is
  // created exclusively, never through a link (POSIX: O_CREAT | O_EXCL | O_NOFOLLOW).
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewTemporaryFile(const std::string& path) {
    DeleteFile(path).IgnoreError();
    return NewWritableFile(path);
  }
  // Opens an existing `path` for writing at its end, without creating or truncating it: how a
  // special file (IsSpecialFile) is written.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) {
    return NewWritableFile(path);
  }
  // Whether `path` must be written in place, never replaced by a rename: it exists and (links
  // followed) is neither a regular file nor a directory (a character device such as /dev/null,
  // a FIFO, a socket, a terminal), or it is a link under /dev/ or /proc/ (/dev/stdout,
  // /dev/fd/1: they may name the file a shell redirected to, which is appended to).
  virtual bool IsSpecialFile(const std::string& path) { return false; }
  virtual bool FileExists(const std::string& path) = 0;
  virtual absl::StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;
  // Names (not paths) of the entries of `dir`, sorted.
  virtual absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  // Creates `dir` and missing parents; OK if it exists.
  virtual absl::Status CreateDirs(const std::string& dir) = 0;
  virtual absl::Status DeleteFile(const std::string& path) = 0;
  // Atomically replaces `to` with `from`.
  virtual absl::Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Makes renames within `dir` durable (fsync of the directory).
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // Takes an exclusive lock on `path` (created if missing) without waiting: kUnavailable
  // ("... is locked") when another holder has it, in this process or another (POSIX: flock,
  // released by the kernel when the holder dies). The file's contents are not looked at.
  // A link or anything but a regular file at `path` is refused (kFailedPrecondition): the
  // lock is never taken, nor its text written, through a link.
  virtual absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& path) = 0;
};

// Reads a whole file.
absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path);
// Why a device could not be opened for writing with ENXIO ("No such device or address"): the
// text after "<path>: " in the messages of Env::NewAppendableFile and the output checks.
inline constexpr char kNoDeviceBehind[] =
    "cannot be opened: no such device or address (a device with nothing behind it, such as "
    "/dev/tty in a process without a controlling terminal)";

// Writes `data` to `path` atomically: `path`.tmp (Env::NewTemporaryFile), fsync, rename,
// fsync of the directory. On failure the temporary is removed and `path` is untouched. A
// special file (Env::IsSpecialFile: /dev/null, a FIFO, /dev/stdout) is appended to in place
// instead (Env::NewAppendableFile): it is never replaced by a regular file.
absl::Status WriteFileAtomically(Env* env, const std::string& path, absl::string_view data);

// sluice's cache directory (sharded IDX files, measured ceilings): $SLUICE_CACHE_DIR, else
// $XDG_CACHE_HOME/sluice, else $HOME/.cache/sluice, else /tmp/sluice-cache.
std::string DefaultCacheDir();

// Path helpers.
std::string JoinPath(absl::string_view dir, absl::string_view name);
std::string DirName(absl::string_view path);
std::string BaseName(absl::string_view path);

}  // namespace sluice

#endif  // SLUICE_COMMON_ENV_H_
