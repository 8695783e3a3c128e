// CudaBackend: the Backend of engine/backend.h on one CUDA GPU.
//
// A training step, all enqueued on the compute stream (no host synchronization):
//   [wait batch.ready_event] [stage: copy host batch / copy into the graph's input slot]
//   [SetLr] then, eagerly or as one CUDA Graph launch:
//   ConvertInput (u8 -> normalized) -> per Linear: cuBLASLt GEMM with bias(+ReLU) epilogue
//   -> fused SoftmaxCrossEntropy (loss and correct count accumulate on the device)
//   -> per Linear, last to first: BiasGrad, dW GEMM, dX GEMM + ReluBackward
//   -> ExchangeGradients (the data-parallel all-reduce point; a no-op for one GPU)
//   -> [fp16: CheckFinite] -> one fused OptimizerStep over all parameters -> FinishStep.
// docs/cuda.md describes layouts, streams, precision modes and memory tags.
//
// Ownership: owns its stream, device memory (DeviceAllocator), cuBLASLt handle and graphs.
// Batches are borrowed: a host batch may be reused as soon as TrainStep returns (it is copied
// to device staging first); a device batch must stay valid until the step completes on the
// compute stream (record an event on compute_stream() after TrainStep to know when).
// Errors: see backend.h. Thread safety: one thread at a time.
// This header is part of every build (the `engine` target); without CUDA the function is the
// stand-in of engine/cuda_unavailable.cc.
#ifndef SLUICE_ENGINE_CUDA_CUDA_BACKEND_H_
#define SLUICE_ENGINE_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"

namespace sluice {

struct CudaBackendOptions {
  int ordinal = 0;          // the GPU (set by CreateBackend from the DeviceSpec)
  bool cuda_graph = false;  // capture the train step into a CUDA Graph (--cuda-graph)
};

// Creates the CUDA backend on GPU `cuda.ordinal`. kUnavailable when sluice was built without
// CUDA (engine/cuda_unavailable.cc) or the device is not usable (saying why); device counts
// and status come from the device layer (device/device.h).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelState& state,
                                                           const OptimizerConfig& opt,
                                                           const BackendOptions& options,
                                                           const CudaBackendOptions& cuda = {});

}  // namespace sluice

#endif  // SLUICE_ENGINE_CUDA_CUDA_BACKEND_H_
