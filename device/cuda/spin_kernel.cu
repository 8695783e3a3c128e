// The device-side delay of device::Stream::Delay: one thread spins on the GPU's global timer.
// A kernel holds only its own stream; a host function that spins (cudaLaunchHostFunc) can also
// hold other streams' host functions, which CUDA may run one at a time.
#include <cuda_runtime.h>

#include <cstdint>

#include "device/cuda/spin_kernel.h"

namespace sluice::device::cuda_internal {

// CUDA kernels

__global__ void SpinKernel(uint64_t ns) {
  uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (uint64_t now = start; now - start < ns;) {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
}

// kernel launchers

cudaError_t LaunchSpinKernel(int64_t ns, cudaStream_t stream) {
  if (ns <= 0) return cudaSuccess;
  SpinKernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(ns));
  return cudaGetLastError();
}

}  // namespace sluice::device::cuda_internal
