// The CPU backend: the Backend of engine/backend.h on the host (OpenBLAS sgemm and the kernels
// of engine/cpu/internal/), each step split across a persistent team of threads in fixed
// slices, so a given thread count is bitwise reproducible (docs/architecture.md, "CPU step").
#ifndef SLUICE_ENGINE_CPU_CPU_BACKEND_H_
#define SLUICE_ENGINE_CPU_CPU_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/backend.h"

namespace sluice {

struct CpuBackendOptions {
  // The threads each batch is split across; 0: all usable cores. sluice-train's default
  // leaves the pipeline its share (engine/job/train_job.h, DefaultComputeThreads).
  int threads = 0;
};

// Creates the CPU backend, starting from `state` (see InitModelState). kInvalidArgument for a
// precision other than fp32, a max_batch < 1, or negative threads.
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelState& state,
                                                          const OptimizerConfig& opt,
                                                          const BackendOptions& options,
                                                          const CpuBackendOptions& cpu = {});

}  // namespace sluice

#endif  // SLUICE_ENGINE_CPU_CPU_BACKEND_H_
