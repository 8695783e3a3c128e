// FileLock: an exclusive, non-blocking lock on a directory for one writer
// (docs/formats/lock.md). A second writer fails at once with one line naming the holder's pid,
// host, start time and purpose; a lock file left by a dead process never blocks.
//
// Ownership: the FileLock borrows its Env (which must outlive it) and releases the lock (and
// removes the lock file) when destroyed.
// Errors: kUnavailable when another holder has the lock; the Env's I/O errors otherwise.
#ifndef SLUICE_COMMON_FILE_LOCK_H_
#define SLUICE_COMMON_FILE_LOCK_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace sluice {

// Who holds a lock: the five lines of the lock file.
struct LockHolder {
  int64_t pid = 0;
  std::string host;
  std::string started;  // RFC 3339, UTC
  std::string purpose;
};

// The lock file's text for `holder` (newlines in host or purpose become spaces).
std::string LockFileContents(const LockHolder& holder);
// Parses a lock file's text; kDataLoss naming `path` when it is not the format of lock.md.
absl::StatusOr<LockHolder> ParseLockFileContents(absl::string_view text, const std::string& path);
// This process: pid, host name and the current time.
LockHolder CurrentProcessHolder(absl::string_view purpose);

class FileLock {
 public:
  static constexpr char kFileName[] = ".sluice.lock";

  // Locks `dir` (created if missing) for `purpose` (e.g. "sluice-shard create (split train)"),
  // without waiting, and records this process as the holder in `dir`/.sluice.lock.
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(Env* env, const std::string& dir,
                                                           absl::string_view purpose);

  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  const std::string& path() const { return file_->path(); }

 private:
  explicit FileLock(std::unique_ptr<LockedFile> file) : file_(std::move(file)) {}
  std::unique_ptr<LockedFile> file_;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_FILE_LOCK_H_
