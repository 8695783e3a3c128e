#include "common/testing/mem_env.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace sluice {
namespace {

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

}  // namespace

std::unique_ptr<Env> NewMemEnv() { return std::make_unique<MemEnv>(); }

}  // namespace sluice
