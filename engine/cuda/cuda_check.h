// cudaCheck / cublasCheck: turn a failed CUDA runtime or cuBLAS(Lt) call into an absl::Status
// and return it from the enclosing function (which must return absl::Status or StatusOr).
//
//   cudaCheck(cudaMalloc(&p, n));      // -> kResourceExhausted "cudaMalloc(&p, n) at f.cc:12: ..."
//   cublasCheck(cublasLtCreate(&lt));
//
// Status codes (abseil canonical): out of memory -> kResourceExhausted; no device, no driver or a
// bad ordinal -> kUnavailable; anything else -> kInternal. The message names the failed
// expression, file:line, the CUDA error name and text, and a hint on what to try.
// Thread safety: stateless; safe from any thread.
#ifndef SLUICE_ENGINE_CUDA_CUDA_CHECK_H_
#define SLUICE_ENGINE_CUDA_CUDA_CHECK_H_

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "device/cuda/cuda_status.h"

namespace sluice::cuda_internal {

// OK for cudaSuccess; otherwise a Status as described above (device/cuda/cuda_status.h).
using ::sluice::device::cuda_internal::CudaStatus;
absl::Status CublasStatus(cublasStatus_t err, const char* expr, const char* file, int line);

using ::sluice::device::cuda_internal::ClearLastCudaError;

// A precondition of a kernel launcher or GEMM (shapes, pointers). kInvalidArgument.
absl::Status PreconditionFailed(const char* cond, const char* file, int line);

}  // namespace sluice::cuda_internal

#define cudaCheck(call) \
  RETURN_IF_ERROR(::sluice::cuda_internal::CudaStatus((call), #call, __FILE__, __LINE__))
#define cublasCheck(call) \
  RETURN_IF_ERROR(::sluice::cuda_internal::CublasStatus((call), #call, __FILE__, __LINE__))
// Launchers assert their shape preconditions with this (kept in release builds, unlike assert).
#define SLUICE_CUDA_EXPECT(cond)                                                                \
  do {                                                                                          \
    if (!(cond)) return ::sluice::cuda_internal::PreconditionFailed(#cond, __FILE__, __LINE__); \
  } while (0)

#endif  // SLUICE_ENGINE_CUDA_CUDA_CHECK_H_
