// The spin kernel behind device::Stream::Delay on CUDA (spin_kernel.cu, the device layer's only
// nvcc-compiled file).
#ifndef SLUICE_DEVICE_CUDA_SPIN_KERNEL_H_
#define SLUICE_DEVICE_CUDA_SPIN_KERNEL_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace sluice::device::cuda_internal {

// Enqueues on `stream` a one-thread kernel that spins for `ns` nanoseconds of the GPU's global
// timer (nothing for ns <= 0). Returns the launch's error (cudaGetLastError).
cudaError_t LaunchSpinKernel(int64_t ns, cudaStream_t stream);

}  // namespace sluice::device::cuda_internal

#endif  // SLUICE_DEVICE_CUDA_SPIN_KERNEL_H_
