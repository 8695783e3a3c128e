// The CUDA implementation of the device layer (device/device.h), and the native handles that
// the engine's CUDA backend needs to launch its kernels and cuBLASLt calls on a device::Stream.
// Only CUDA code includes this header.
// Thread safety: as device/device.h.
#ifndef SLUICE_DEVICE_CUDA_CUDA_DEVICE_H_
#define SLUICE_DEVICE_CUDA_CUDA_DEVICE_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "device/device.h"

namespace sluice::device {

// The cudaStream_t / cudaEvent_t behind a stream or event of a CUDA Device. `stream` and
// `event` must come from a CUDA Device (checked: a null handle for any other platform).
cudaStream_t NativeCudaStream(Stream* stream);
cudaEvent_t NativeCudaEvent(Event* event);

// A Stream of CUDA device `ordinal` over a stream someone else owns (e.g. PyTorch's current
// stream), so that device-layer code can order work with it (Wait, Record). The wrapper does
// not synchronize or destroy `stream`; `stream` must outlive it.
std::unique_ptr<Stream> BorrowCudaStream(int ordinal, cudaStream_t stream);

}  // namespace sluice::device

#endif  // SLUICE_DEVICE_CUDA_CUDA_DEVICE_H_
