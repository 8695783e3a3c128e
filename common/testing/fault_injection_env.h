// FaultInjectionEnv: wraps another Env and injects failures (a full disk, failing renames), for
// tests, fuzzers and benchmarks (target sluice::testing).
// Ownership: borrows `base`, which must outlive it.
// Thread safety: thread safe; the fault settings may change while other threads use the Env.
#ifndef SLUICE_COMMON_TESTING_FAULT_INJECTION_ENV_H_
#define SLUICE_COMMON_TESTING_FAULT_INJECTION_ENV_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"

namespace sluice {

class FaultInjectionEnv : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // After `bytes` more bytes have been appended (over all writable files), every Append
  // fails with ResourceExhausted ("No space left on device"), as a full disk does.
  // A negative value disables the fault.
  void FailWritesAfter(int64_t bytes);
  // Makes the next RenameFile calls fail (when `fail` is true).
  void FailRenames(bool fail) { fail_renames_ = fail; }
  // Lets `renames` more RenameFile calls succeed, then fails every later one; negative: never.
  void FailRenamesAfter(int64_t renames) { renames_left_ = renames; }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return base_->NewRandomAccessFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    return base_->GetFileSize(path);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    return base_->GetChildren(dir);
  }
  absl::Status CreateDirs(const std::string& dir) override { return base_->CreateDirs(dir); }
  absl::Status DeleteFile(const std::string& path) override { return base_->DeleteFile(path); }
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& path) override {
    return base_->LockFile(path);
  }

  // Called by the injected writable files; returns false when the write must fail.
  bool ConsumeWriteBudget(size_t n);

 private:
  Env* base_;
  std::atomic<int64_t> write_budget_{-1};
  std::atomic<bool> fail_renames_{false};
  std::atomic<int64_t> renames_left_{-1};
};

}  // namespace sluice

#endif  // SLUICE_COMMON_TESTING_FAULT_INJECTION_ENV_H_
