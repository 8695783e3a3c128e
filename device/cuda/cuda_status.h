// CUDA runtime errors as absl::Status, for the code that calls the CUDA runtime (device/cuda/
// and engine/cuda/). Not part of the device layer's public interface.
//
//   SLUICE_CUDA_CHECK(cudaMalloc(&p, n));  // -> kResourceExhausted "cudaMalloc(&p, n) failed at
//   f.cc:12: ..."
//
// Status codes (abseil canonical): out of memory -> kResourceExhausted; no device, no driver or
// a bad ordinal -> kUnavailable; anything else -> kInternal. The message names the failed
// expression, file:line, the CUDA error name and text, and a hint on what to try.
// Thread safety: stateless.
#ifndef SLUICE_DEVICE_CUDA_CUDA_STATUS_H_
#define SLUICE_DEVICE_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "common/status_macros.h"

namespace sluice::device::cuda_internal {

// OK for cudaSuccess; otherwise a Status as described above.
absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line);

// Clears a sticky "last error" left by a failed runtime call that was already handled.
inline void ClearLastCudaError() { (void)cudaGetLastError(); }

}  // namespace sluice::device::cuda_internal

#define SLUICE_CUDA_CHECK(call) \
  RETURN_IF_ERROR(::sluice::device::cuda_internal::CudaStatus((call), #call, __FILE__, __LINE__))

#endif  // SLUICE_DEVICE_CUDA_CUDA_STATUS_H_
