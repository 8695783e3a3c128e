#include "common/env.h"

#include <cstdlib>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
      ssize_t w = ::pwrite(fd_, contents.data() + done, contents.size() - done,
                           static_cast<off_t>(done));
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
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::make_unique<PosixRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError("open for writing", path, errno);
    return std::make_unique<PosixWritableFile>(path, fd);
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
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return PosixError("open lock file", path, errno);
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

// ---------------------------------------------------------------------------------------------
// In-memory Env.

struct MemFileData {
  absl::Mutex mu;
  std::string bytes;
};

class MemRandomAccessFile final : public RandomAccessFile {
 public:
  MemRandomAccessFile(std::string path, std::shared_ptr<MemFileData> data)
      : path_(std::move(path)), data_(std::move(data)) {
    absl::MutexLock l(&data_->mu);
    snapshot_ = data_->bytes;
  }
  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    if (offset >= snapshot_.size()) return size_t{0};
    size_t k = std::min<uint64_t>(n, snapshot_.size() - offset);
    std::memcpy(scratch, snapshot_.data() + offset, k);
    return k;
  }
  uint64_t Size() const override { return snapshot_.size(); }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MemFileData> data_;
  std::string snapshot_;
};

class MemWritableFile final : public WritableFile {
 public:
  explicit MemWritableFile(std::shared_ptr<MemFileData> data) : data_(std::move(data)) {}
  absl::Status Append(absl::string_view d) override {
    absl::MutexLock l(&data_->mu);
    data_->bytes.append(d.data(), d.size());
    return absl::OkStatus();
  }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::Status Close() override { return absl::OkStatus(); }

 private:
  std::shared_ptr<MemFileData> data_;
};

class MemEnv final : public Env {
 public:
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    absl::MutexLock l(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return std::make_unique<MemRandomAccessFile>(path, it->second);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    absl::MutexLock l(&mu_);
    auto data = std::make_shared<MemFileData>();
    files_[path] = data;
    return std::make_unique<MemWritableFile>(data);
  }
  bool FileExists(const std::string& path) override {
    absl::MutexLock l(&mu_);
    return files_.count(path) > 0;
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    absl::MutexLock l(&mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    absl::MutexLock fl(&it->second->mu);
    return it->second->bytes.size();
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    absl::MutexLock l(&mu_);
    std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
    std::vector<std::string> out;
    for (const auto& [path, data] : files_) {
      if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
          path.find('/', prefix.size()) == std::string::npos) {
        out.push_back(path.substr(prefix.size()));
      }
    }
    return out;  // std::map keeps them sorted
  }
  absl::Status CreateDirs(const std::string&) override { return absl::OkStatus(); }
  absl::Status DeleteFile(const std::string& path) override {
    absl::MutexLock l(&mu_);
    if (files_.erase(path) == 0) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::OkStatus();
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    absl::MutexLock l(&mu_);
    auto it = files_.find(from);
    if (it == files_.end()) return absl::NotFoundError(absl::StrCat(from, ": no such file"));
    files_[to] = it->second;
    files_.erase(from);
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& path) override;

  // For MemLockedFile.
  void SetContents(const std::string& path, absl::string_view contents) {
    absl::MutexLock l(&mu_);
    auto data = std::make_shared<MemFileData>();
    data->bytes.assign(contents.data(), contents.size());
    files_[path] = std::move(data);
  }
  void Unlock(const std::string& path) {
    absl::MutexLock l(&mu_);
    files_.erase(path);
    locked_.erase(path);
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<MemFileData>> files_;
  std::set<std::string> locked_;  // paths locked through LockFile
};

class MemLockedFile final : public LockedFile {
 public:
  MemLockedFile(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}
  ~MemLockedFile() override { env_->Unlock(path_); }
  absl::Status WriteContents(absl::string_view contents) override {
    env_->SetContents(path_, contents);
    return absl::OkStatus();
  }
  const std::string& path() const override { return path_; }

 private:
  MemEnv* env_;
  std::string path_;
};

absl::StatusOr<std::unique_ptr<LockedFile>> MemEnv::LockFile(const std::string& path) {
  absl::MutexLock l(&mu_);
  if (!locked_.insert(path).second) {
    return absl::UnavailableError(absl::StrCat(path, ": is locked by another holder"));
  }
  if (files_.count(path) == 0) files_[path] = std::make_shared<MemFileData>();
  return std::unique_ptr<LockedFile>(new MemLockedFile(this, path));
}

// ---------------------------------------------------------------------------------------------
// Fault injection.

class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(FaultInjectionEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  absl::Status Append(absl::string_view data) override {
    if (!env_->ConsumeWriteBudget(data.size())) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path_, ": write failed: No space left on device (injected)"));
    }
    return base_->Append(data);
  }
  absl::Status Sync() override { return base_->Sync(); }
  absl::Status Close() override { return base_->Close(); }

 private:
  FaultInjectionEnv* env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv;
  return env;
}

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

void FaultInjectionEnv::FailWritesAfter(int64_t bytes) { write_budget_.store(bytes); }

bool FaultInjectionEnv::ConsumeWriteBudget(size_t n) {
  int64_t budget = write_budget_.load();
  while (budget >= 0) {
    if (static_cast<int64_t>(n) > budget) {
      write_budget_.store(0);
      return false;
    }
    if (write_budget_.compare_exchange_weak(budget, budget - static_cast<int64_t>(n))) return true;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(
    const std::string& path) {
  ASSIGN_OR_RETURN(auto base, base_->NewWritableFile(path));
  return std::make_unique<FaultyWritableFile>(this, path, std::move(base));
}

absl::Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  int64_t left = renames_left_.load();
  while (left > 0 && !renames_left_.compare_exchange_weak(left, left - 1)) {
  }
  if (fail_renames_ || left == 0) {
    return absl::InternalError(absl::StrCat(from, ": rename to ", to, " failed (injected)"));
  }
  return base_->RenameFile(from, to);
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
  const std::string tmp = path + ".tmp";
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(auto file, env->NewWritableFile(tmp));
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
