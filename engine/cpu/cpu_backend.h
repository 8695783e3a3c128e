// The CPU backend: the Backend of engine/backend.h on the host (OpenBLAS sgemm and the kernels
// of engine/cpu/internal/), each step split across a persistent team of threads in fixed
// slices, so a given thread count is bitwise reproducible (docs/architecture.md, "CPU step").
#ifndef SLUICE_ENGINE_CPU_CPU_BACKEND_H_
#define SLUICE_ENGINE_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"

namespace sluice {

struct CpuBackendOptions {
  // The threads each batch is split across; 0: all usable cores. sluice-train's default
  // leaves the pipeline its share (engine/job/train_job.h, DefaultComputeThreads).
  int threads = 0;
  // Plain SGD (no momentum, no weight decay) steps each dense weight inside its gradient's
  // sgemm (W^T -= lr * x^T dy, beta = 1): no gradient stores and no optimizer pass (the
  // batch-32 step of the reference MLP: 300 -> 210 us on one thread). false computes the
  // gradient, then steps it, as a data-parallel run always does (it needs the gradient for
  // the exchange). The two agree up to rounding, and agree bitwise only under some OpenBLAS
  // kernels: a single-process run compared bitwise with an --exchange-always run must turn
  // this off (docs/distributed.md, "A world of one").
  bool fused_sgd = true;
};

// Creates the CPU backend, starting from `state` (see InitModelState). kInvalidArgument for a
// precision other than fp32, a max_batch < 1, or negative threads.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelState& state,
                                                          const OptimizerConfig& opt,
                                                          const BackendOptions& options,
                                                          const CpuBackendOptions& cpu = {});

// The host bytes CreateCpuBackend allocates for `model` (every buffer it tags in its
// MemoryLedger): parameters, gradients, optimizer state, activations, the input batch and the
// per-thread workspace (past the first thread, a copy of the first layer's weight gradients
// when the sparse kernels run: about the parameters' size again for a wide first layer).
// `threads` as CpuBackendOptions::threads (0: all usable cores). Saturates at UINT64_MAX.
uint64_t CpuBackendAllocationBytes(const ModelConfig& model, const OptimizerConfig& opt,
                                   int max_batch, int threads);

}  // namespace sluice

#endif  // SLUICE_ENGINE_CPU_CPU_BACKEND_H_
