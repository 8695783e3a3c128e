// CheckRunFits: a training run's sizes checked against its data and the memory the process can
// get, before the backend and the pipeline allocate anything (docs/limits.md).
//
// Errors (one line each, naming the value and the bound):
//   kInvalidArgument    a batch larger than the training split
//   kResourceExhausted  a record or batch whose size overflows, or a run whose estimated
//                       memory (model, optimizer state, activations, batch buffers and, under
//                       an address-space limit, the threads' stacks, malloc arenas and BLAS
//                       buffers) exceeds what is available
// Thread safety: thread-safe (reads /proc and getrlimit).
#ifndef SLUICE_ENGINE_JOB_RUN_LIMITS_H_
#define SLUICE_ENGINE_JOB_RUN_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/job/train_job.h"
#include "storage/dataset.h"

namespace sluice {

// Address space one thread of the run is counted for under ulimit -v: its stack (8 MiB), a
// glibc malloc arena it may create (64 MiB reserved) and an OpenBLAS buffer (32 MiB).
inline constexpr uint64_t kAddressSpacePerThread = uint64_t{104} << 20;

// The estimate CheckRunFits compares; exposed for tests.
struct RunMemoryEstimate {
  // Parameters, gradients, optimizer state, activations; on a host backend (cpu, sim) what
  // CpuBackendAllocationBytes counts (workspace included) plus the job's initial model state.
  uint64_t model_bytes = 0;
  uint64_t buffer_bytes = 0;  // the pipeline's batch buffers and the backend's input
  uint64_t threads = 0;       // threads the run may start
  uint64_t thread_bytes = 0;  // threads x kAddressSpacePerThread (counted under ulimit -v)
  // The transforms' scratch, per preprocess thread and pipeline (train and test): sized for
  // the chain's largest sample (an encoded image's bound), mostly untouched, so counted under
  // ulimit -v only.
  uint64_t scratch_bytes = 0;
};

absl::StatusOr<RunMemoryEstimate> EstimateRunMemory(const TrainJobOptions& options,
                                                    const Dataset& train);

absl::Status CheckRunFits(const TrainJobOptions& options, const Dataset& train);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_RUN_LIMITS_H_
