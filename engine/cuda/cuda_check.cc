#include "engine/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace sluice::cuda_internal {
namespace {

const char* CudaHint(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return "out of device memory: lower --batch-size or free the GPU (nvidia-smi shows who holds it)";
    case cudaErrorNoDevice:
      return "no CUDA device is visible: check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu";
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver (or one too old for this CUDA runtime): install the driver, or use --device cpu";
    case cudaErrorInvalidDevice:
      return "the device ordinal is out of range: see nvidia-smi for the devices present";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return "this binary holds sm_90 code plus PTX: rebuild with -DCMAKE_CUDA_ARCHITECTURES=<your sm>";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel faulted: rerun under compute-sanitizer to find it";
    default:
      return "rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing call";
  }
}

absl::StatusCode CudaCode(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::Status(CudaCode(err),
                      absl::StrCat(expr, " failed at ", file, ":", line, ": ",
                                   cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                   "); hint: ", CudaHint(err)));
}

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
  return absl::Status(code, absl::StrCat(expr, " failed at ", file, ":", line, ": ",
                                         cublasGetStatusName(err), " (",
                                         cublasGetStatusString(err), "); hint: ", hint));
}

absl::Status PreconditionFailed(const char* cond, const char* file, int line) {
  return absl::InvalidArgumentError(
      absl::StrCat("CUDA launcher precondition failed: ", cond, " at ", file, ":", line));
}

}  // namespace sluice::cuda_internal
