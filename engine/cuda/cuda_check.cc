#include "engine/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace sluice::cuda_internal {
absl::Status CublasStatus(cublasStatus_t err, const char* expr, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  const char* hint = "rerun with CUBLASLT_LOG_LEVEL=5 to see cuBLASLt's reason";
  if (err == CUBLAS_STATUS_ALLOC_FAILED) {
    code = absl::StatusCode::kResourceExhausted;
    hint = "out of device memory: lower --batch-size";
  } else if (err == CUBLAS_STATUS_NOT_INITIALIZED) {
    code = absl::StatusCode::kUnavailable;
    hint = "cuBLAS could not initialize: is a CUDA device present and the driver loaded?";
  } else if (err == CUBLAS_STATUS_NOT_SUPPORTED || err == CUBLAS_STATUS_INVALID_VALUE) {
    hint = "unsupported layout/type/epilogue combination; CUBLASLT_LOG_LEVEL=5 says which";
  }
  return absl::Status(
      code, absl::StrCat(expr, " failed at ", file, ":", line, ": ", cublasLtGetStatusName(err),
                         " (", cublasLtGetStatusString(err), "); hint: ", hint));
}

absl::Status PreconditionFailed(const char* cond, const char* file, int line) {
  return absl::InvalidArgumentError(
      absl::StrCat("CUDA launcher precondition failed: ", cond, " at ", file, ":", line));
}

}  // namespace sluice::cuda_internal
