#include "common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

absl::Status PosixError(absl::string_view op, const std::string& path, int err) {
  std::string msg = absl::StrCat(path, ": ", op, " failed: ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return PosixError("pread", path_, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }
  uint64_t Size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Append(absl::string_view data) override {
    const char* p = data.data();
    size_t left = data.size();
    while (left > 0) {
      ssize_t w = ::write(fd_, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fsync(fd_) != 0) return PosixError("fsync", path_, errno);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    int r = ::close(fd_);
    fd_ = -1;
    if (r != 0) return PosixError("close", path_, errno);
    return absl::OkStatus();
  }

 private:
  std::string path_;
  int fd_;
};

// ENAMETOOLONG before any directory is made: the path within PATH_MAX and each name within
// NAME_MAX.
absl::Status CheckPathLength(const std::string& path) {
  auto too_long = [&](absl::string_view what, size_t length, size_t max) {
    return absl::InvalidArgumentError(absl::StrCat(path.substr(0, 64), "...: file name too long (",
                                                   what, " of ", length, " characters; at most ",
                                                   max, ")"));
  };
  if (path.size() >= PATH_MAX) return too_long("a path", path.size(), PATH_MAX - 1);
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end - start > NAME_MAX) return too_long("a name", end - start, NAME_MAX);
    start = end + 1;
  }
  return absl::OkStatus();
}

// A lock file opened without following links must still be a regular file: a FIFO or a
// device planted under the lock's name is refused, not written to. (O_NONBLOCK kept the open
// of a FIFO from blocking; a regular file ignores it.)
absl::Status CheckRegularLockFile(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return PosixError("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     ": is not a regular file; sluice creates its lock file itself "
                     "(remove what is there)"));
  }
  return absl::OkStatus();
}

// Holds flock on `fd_`; docs/formats/lock.md ("Protocol").
class PosixLockedFile final : public LockedFile {
 public:
  PosixLockedFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixLockedFile() override {
    ::unlink(path_.c_str());  // while still locked, so no other holder's file is removed
    ::close(fd_);             // drops the flock
  }
  absl::Status WriteContents(absl::string_view contents) override {
    if (::ftruncate(fd_, 0) != 0) return PosixError("ftruncate", path_, errno);
    size_t done = 0;
    while (done < contents.size()) {
      ssize_t w =
          ::pwrite(fd_, contents.data() + done, contents.size() - done, static_cast<off_t>(done));
      if (w < 0) {
        if (errno == EINTR) continue;
        return PosixError("write", path_, errno);
      }
      done += static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

class PosixEnv final : public Env {
 public:
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer; it is refused below.
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return PosixError("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return PosixError("fstat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, expected a file"));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": is not a regular file (a FIFO, a device or a socket), expected a file"));
    }
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError("open for writing", path, errno);
    return std::make_unique<PosixWritableFile>(path, fd);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewTemporaryFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return PosixError("unlink", path, errno);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError("create", path, errno);
    return std::make_unique<PosixWritableFile>(path, fd);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    // O_NONBLOCK: a FIFO whose reader has gone is an error now, not a wait for ever for the
    // next reader; the writes then block as usual.
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENXIO) {
      struct stat st;
      if (::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
        return absl::FailedPreconditionError(
            absl::StrCat(path,
                         ": a FIFO that no process is reading (no reader: a FIFO needs a reader "
                         "started before the run, reading until the output is written)"));
      }
      // ENXIO from a device: /dev/tty in a process without a controlling terminal.
      return absl::FailedPreconditionError(absl::StrCat(path, ": ", kNoDeviceBehind));
    }
    if (fd < 0) return PosixError("open for writing", path, errno);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return std::make_unique<PosixWritableFile>(path, fd);
  }
  bool IsSpecialFile(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return true;
    const bool under_dev_or_proc = path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0;
    return under_dev_or_proc && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  }
  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return PosixError("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return PosixError("opendir", dir, errno);
    std::vector<std::string> out;
    while (struct dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }
  absl::Status CreateDirs(const std::string& dir) override {
    if (dir.empty()) return absl::OkStatus();
    // Checked before anything is created: mkdir would fail only deep down, after creating
    // every directory above the first name the kernel refuses.
    RETURN_IF_ERROR(CheckPathLength(dir));
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat(dir, ": exists and is not a directory"));
    }
    std::string parent = DirName(dir);
    if (!parent.empty() && parent != dir && parent != "." && parent != "/") {
      RETURN_IF_ERROR(CreateDirs(parent));
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return PosixError("mkdir", dir, errno);
    return absl::OkStatus();
  }
  absl::Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError("unlink", path, errno);
    return absl::OkStatus();
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return PosixError(absl::StrCat("rename to ", to), from, errno);
    }
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError("open directory", dir, errno);
    int r = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (r != 0 && err != EINVAL) return PosixError("fsync directory", dir, err);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& path) override {
    for (;;) {
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
      if (fd < 0 && errno == ELOOP) {
        return absl::FailedPreconditionError(
            absl::StrCat(path,
                         ": is a symbolic link; sluice creates its lock file itself and "
                         "never writes through a link (remove the link)"));
      }
      if (fd < 0) return PosixError("open lock file", path, errno);
      if (absl::Status regular = CheckRegularLockFile(fd, path); !regular.ok()) {
        ::close(fd);
        return regular;
      }
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        ::close(fd);
        if (err == EINTR) continue;
        if (err == EWOULDBLOCK) {
          return absl::UnavailableError(absl::StrCat(path, ": is locked by another holder"));
        }
        return PosixError("flock", path, err);
      }
      // The previous holder unlinks the file before releasing it: if `path` no longer names
      // the file we locked, we hold a lock nobody else can see; start again.
      struct stat locked, current;
      if (::fstat(fd, &locked) != 0) {
        const int err = errno;
        ::close(fd);
        return PosixError("fstat", path, err);
      }
      if (::stat(path.c_str(), &current) != 0) {
        const int err = errno;
        ::close(fd);
        if (err == ENOENT) continue;
        return PosixError("stat", path, err);
      }
      if (locked.st_dev != current.st_dev || locked.st_ino != current.st_ino) {
        ::close(fd);
        continue;
      }
      return std::unique_ptr<LockedFile>(new PosixLockedFile(path, fd));
    }
  }
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv;
  return env;
}

absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(auto file, env->NewRandomAccessFile(path));
  std::string out(file->Size(), '\0');
  ASSIGN_OR_RETURN(size_t n, file->Read(0, out.size(), out.data()));
  if (n != out.size()) {
    return absl::DataLossError(
        absl::StrCat(path, ": short read: expected ", out.size(), " bytes, got ", n));
  }
  return out;
}

absl::Status WriteFileAtomically(Env* env, const std::string& path, absl::string_view data) {
  if (env->IsSpecialFile(path)) {
    ASSIGN_OR_RETURN(auto file, env->NewAppendableFile(path));
    RETURN_IF_ERROR(file->Append(data));
    return file->Close();
  }
  const std::string tmp = path + ".tmp";
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto file, env->NewTemporaryFile(tmp));
    RETURN_IF_ERROR(file->Append(data));
    RETURN_IF_ERROR(file->Sync());
    RETURN_IF_ERROR(file->Close());
    RETURN_IF_ERROR(env->RenameFile(tmp, path));
    return env->SyncDir(DirName(path));
  }();
  if (!s.ok()) env->DeleteFile(tmp).IgnoreError();
  return s;
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

std::string DirName(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string BaseName(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string DefaultCacheDir() {
  if (const char* d = std::getenv("SLUICE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return JoinPath(d, "sluice");
  if (const char* d = std::getenv("HOME"); d && *d) return JoinPath(d, ".cache/sluice");
  return "/tmp/sluice-cache";
}

}  // namespace sluice
