#include "common/testing/fault_injection_env.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {
namespace {

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

}  // namespace sluice
