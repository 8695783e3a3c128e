#include "tools/stdout_output.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/printable.h"

namespace sluice {
namespace {

// The /dev/fd/N path of the original stdout, once routed; empty before.
std::string& RoutedPath() {
  static std::string* path = new std::string;
  return *path;
}

bool SpellsStdout(const std::string& path) {
  return path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1";
}

// Whether `path` is the file stdout is: the same inode, and a file, a pipe or a terminal (not
// /dev/null, which any number of outputs may share with stdout).
bool IsStdoutFile(const std::string& path, const struct stat& out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || st.st_dev != out.st_dev || st.st_ino != out.st_ino) {
    return false;
  }
  return S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
         (S_ISCHR(st.st_mode) && ::isatty(STDOUT_FILENO));
}

}  // namespace

absl::Status RouteStdoutOutputs(const std::vector<OutputFlag>& outputs) {
  struct stat out;
  const bool stdout_open = ::fstat(STDOUT_FILENO, &out) == 0;
  const OutputFlag* to_stdout = nullptr;
  bool regular = false;  // a regular file that stdout is: keeps its path
  for (const OutputFlag& o : outputs) {
    const std::string& path = *o.path;
    if (path.empty()) continue;
    const bool spelled = SpellsStdout(path);
    if (!spelled && !(stdout_open && IsStdoutFile(path, out))) continue;
    if (!stdout_open) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", o.flag, " ", Printable(path), ": stdout is closed"));
    }
    if (to_stdout != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", to_stdout->flag, " and --", o.flag,
                       " both write to stdout: one would corrupt the other (write one to a file)"));
    }
    to_stdout = &o;
    regular = !spelled && S_ISREG(out.st_mode);
  }
  if (to_stdout == nullptr) return absl::OkStatus();
  const int saved = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (saved < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", to_stdout->flag, " ", Printable(*to_stdout->path), ": stdout cannot be duplicated"));
  }
  std::fflush(stdout);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  if (regular) {
    ::close(saved);
    return absl::OkStatus();
  }
  RoutedPath() = absl::StrCat("/dev/fd/", saved);
  *to_stdout->path = RoutedPath();
  return absl::OkStatus();
}

std::string ShownOutputPath(const std::string& path) {
  if (!RoutedPath().empty() && path == RoutedPath()) return "stdout";
  return Printable(path);
}

void IgnoreBrokenPipes() { ::signal(SIGPIPE, SIG_IGN); }

bool StdoutReaderGone() {
  if (!std::ferror(stdout)) return false;
  struct stat st;
  if (::fstat(STDOUT_FILENO, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    return false;
  }
  // A pipe whose reading end is closed polls as POLLERR; a closed socket as POLLHUP or POLLERR.
  struct pollfd p = {STDOUT_FILENO, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

// Why an earlier write to stdout failed, where stdio kept no errno: a full file system, or the
// full device (/dev/full) behind stdout; empty when neither explains it.
std::string EarlierWriteFailure() {
  struct stat st;
  if (::fstat(STDOUT_FILENO, &st) != 0) return "";
  struct stat full;
  if (S_ISCHR(st.st_mode) && ::stat("/dev/full", &full) == 0 && st.st_rdev == full.st_rdev) {
    return std::strerror(ENOSPC);
  }
  struct statvfs fs;
  if (S_ISREG(st.st_mode) && ::fstatvfs(STDOUT_FILENO, &fs) == 0 && fs.f_bavail == 0) {
    return std::strerror(ENOSPC);
  }
  return "";
}

absl::Status FinishStdout(bool reader_gone_ok) {
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int flush_errno = errno;
  if (!flush_failed && !std::ferror(stdout)) return absl::OkStatus();
  if (StdoutReaderGone() || (flush_failed && flush_errno == EPIPE)) {
    if (reader_gone_ok) return absl::OkStatus();
    return absl::FailedPreconditionError("stdout: its reader has gone (broken pipe)");
  }
  // An earlier write failed (stdio keeps no errno): write nothing more, say what the flush says,
  // else what the file behind stdout shows (a full disk), else that a write failed.
  std::string why = flush_failed && flush_errno != 0 ? std::strerror(flush_errno) : "";
  if (why.empty()) why = EarlierWriteFailure();
  if (why.empty()) why = "an earlier write failed";
  return absl::InternalError(
      absl::StrCat("stdout: write failed: ", why, " (the other outputs were written)"));
}

}  // namespace sluice
