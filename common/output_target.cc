#include "common/output_target.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/printable.h"

namespace sluice {
namespace {

std::string Named(absl::string_view flag, const std::string& path) {
  return absl::StrCat("--", flag, " ", Printable(path), ": ");
}

// The descriptors of the FIFOs probed with a reader: open until the process exits (see the
// header), never written.
void HoldUntilExit(int fd) {
  static std::mutex mu;
  static std::vector<int>* held = new std::vector<int>;
  std::lock_guard<std::mutex> lock(mu);
  held->push_back(fd);
}

absl::Status ProbeFifo(const std::string& path, absl::string_view flag) {
  // O_NONBLOCK: with no reader the open fails at once (ENXIO) instead of waiting for one.
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    HoldUntilExit(fd);
    return absl::OkStatus();
  }
  if (errno == ENXIO) {
    return absl::FailedPreconditionError(absl::StrCat(
        Named(flag, path), "a FIFO that no process is reading (start its reader first)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Named(flag, path), "cannot be written: ", std::strerror(errno)));
}

// What a target that sluice does not write is called in the refusal.
const char* Unwritable(mode_t mode) {
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return nullptr;
}

}  // namespace

absl::Status ProbeOutputFile(Env* env, const std::string& path, absl::string_view flag) {
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists) {
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Named(flag, path), "is a directory (expected a file path)"));
    }
    if (const char* what = Unwritable(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Named(flag, path), "is ", what,
          " (expected a file path, a FIFO with a reader, or a character device such as "
          "/dev/stdout)"));
    }
    if (S_ISFIFO(st.st_mode)) return ProbeFifo(path, flag);
  } else if (env->GetChildren(path).ok()) {
    // Not on this file system (an Env of tests) but a directory there.
    return absl::InvalidArgumentError(
        absl::StrCat(Named(flag, path), "is a directory (expected a file path)"));
  }
  if (env->IsSpecialFile(path)) {
    // /dev/null, a terminal, /dev/stdout naming a file: checked, not opened, and nothing is
    // created beside it.
    if (::access(path.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Named(flag, path), "cannot be written: ", std::strerror(errno)));
    }
    if (exists && S_ISCHR(st.st_mode)) {
      // A device may refuse the open that access(2) allowed: /dev/tty in a process without a
      // controlling terminal (ENXIO) failed only when the output was written, after the work.
      // Opened and closed at once: without waiting, never becoming the controlling terminal.
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        return absl::InvalidArgumentError(
            err == ENXIO
                ? absl::StrCat(Named(flag, path), kNoDeviceBehind)
                : absl::StrCat(Named(flag, path), "cannot be written: ", std::strerror(err)));
      }
      ::close(fd);
    }
    return absl::OkStatus();
  }
  // The temporary the write will use: a missing directory or an overlong name there fails
  // now, not after the work.
  const std::string probe = absl::StrCat(path, ".tmp");
  auto file = env->NewTemporaryFile(probe);
  absl::Status status = file.status();
  if (status.ok()) status = (*file)->Close();
  if (file.ok()) {
    file->reset();
    absl::Status removed = env->DeleteFile(probe);
    if (status.ok()) status = removed;
  }
  if (!status.ok()) {
    // A missing directory named as such, not by the temporary's failure.
    const size_t slash = path.find_last_of('/');
    const std::string dir =
        slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
    struct stat dir_st;
    if (::stat(dir.c_str(), &dir_st) != 0 && errno == ENOENT) {
      return absl::InvalidArgumentError(absl::StrCat(Named(flag, path), "its directory ",
                                                     Printable(dir),
                                                     " does not exist (create it first)"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(Named(flag, path), "cannot be written: ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status ProbeOutputDirectory(const std::string& path, absl::string_view flag) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      const char* what = S_ISREG(st.st_mode)    ? "a file"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "a device";
      return absl::InvalidArgumentError(
          absl::StrCat(Named(flag, path), "is ", what, " (expected a directory)"));
    }
    if (::access(path.c_str(), W_OK | X_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Named(flag, path), "cannot be written: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  if (errno == ENAMETOOLONG) {
    return absl::InvalidArgumentError(absl::StrCat(
        Named(flag, path), "file name too long (", path.size(), " characters; a path has at most ",
        PATH_MAX - 1, ", each name in it at most ", NAME_MAX, ")"));
  }
  if (errno != ENOENT) {
    return absl::InvalidArgumentError(
        absl::StrCat(Named(flag, path), "cannot be used: ", std::strerror(errno)));
  }
  // Created by the write: the nearest existing parent must be a directory it can write in.
  std::string parent = DirName(path);
  while (::stat(parent.c_str(), &st) != 0 && errno == ENOENT && parent != DirName(parent)) {
    parent = DirName(parent);
  }
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Named(flag, path), "cannot be created: ", Printable(parent), " is not a directory"));
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Named(flag, path), "cannot be created in ",
                                                   Printable(parent), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace sluice
