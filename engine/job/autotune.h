// Autotune (--autotune): after the first epoch, adjusts the pipeline's stage concurrency, pinned
// pool size, device ring depth and read-ahead from the measured statistics, within a CPU and memory
// budget, and says what it chose and why. The new settings apply from the next epoch on (the
// pipeline is rebuilt at the epoch boundary; the order of samples does not depend on these
// settings).
//
// Rules, in order (docs/bottleneck.md, "Autotune"):
//   1. compute waited < 5% of training time: the pipeline keeps up; nothing changes.
//   2. a pipeline stage's capacity is below 1.2x compute's: give that stage more room:
//      decompress/preprocess concurrency x2 (at most the CPU budget), read-ahead x2 for read
//      (at most 64 frames).
//   3. the copies waited for a device ring slot at least as long as they copied (the advice's
//      evidence, CopiesWaitedForSlots): double the device ring (within the device memory
//      budget, ring slots x batch bytes, and kMaxDeviceRingDepth).
//   4. otherwise the waits are hand-off stalls: double the pinned pool (within the memory
//      budget), since more batches in flight hide them.
// Thread safety: a pure function.
#ifndef SLUICE_ENGINE_JOB_AUTOTUNE_H_
#define SLUICE_ENGINE_JOB_AUTOTUNE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/pipeline.h"
#include "pipeline/resource_limits.h"
#include "report/record/run_record.h"

namespace sluice {

// The most device ring slots autotune gives (sluice-train's --device-ring-depth accepts 2..64).

struct AutotuneBudget {
  int cpu_threads = 2;                       // most concurrency any stage may get
  uint64_t memory_bytes = 256 << 20;         // most bytes of pinned batch buffers
  uint64_t device_memory_bytes = 256 << 20;  // most bytes of device ring slots
};

struct AutotuneDecision {
  PipelineResources resources;  // the settings to use from the next epoch on
  bool changed = false;
  std::vector<std::string> reasons;  // one line per decision, for the user
};

// `current` must have its automatic values resolved (pool_size and thread counts as run:
// PipelineStats has them). `batch_bytes` is one pinned buffer's size, and one device ring
// slot's. Autotune sees and
// returns only resources, so it cannot change the order of samples or the placement.
AutotuneDecision Autotune(const PipelineResources& current, const PipelineStats& stats,
                          const ComputeStats& compute, double train_seconds,
                          const AutotuneBudget& budget, uint64_t batch_bytes);

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_AUTOTUNE_H_
