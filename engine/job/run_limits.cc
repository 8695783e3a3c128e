#include "engine/job/run_limits.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/job/ranks.h"
#include "engine/job/train_job.h"
#include "engine/memory.h"
#include "pipeline/batch_format.h"

namespace sluice {

absl::StatusOr<RunMemoryEstimate> EstimateRunMemory(const TrainJobOptions& options,
                                                    const Dataset& train) {
  RunMemoryEstimate e;
  // The batch's samples: the transforms' output (the stored samples without them).
  ASSIGN_OR_RETURN(const ResolvedBatchFormat format,
                   ResolveBatchFormat(train.spec(), options.pipeline.format, SettingNames::kFlags,
                                      train.manifest().image_bound));
  const SampleSpec& spec = format.sample;
  const uint64_t batch = options.pipeline.order.batch_size;
  const std::string what = absl::StrCat("a batch of ", batch, " samples of ", spec.channels, "x",
                                        spec.height, "x", spec.width);
  ASSIGN_OR_RETURN(const uint64_t features,
                   CheckedProduct(what, {spec.height, spec.width, spec.channels}));
  // A batch as the backend reads it (f32 at most) plus its labels.
  ASSIGN_OR_RETURN(const uint64_t batch_bytes, CheckedProduct(what, {batch, features * 4 + 4}));
  uint64_t pool = options.pipeline.resources.pool_size;
  if (pool == 0) pool = AutoPoolSize(batch, batch_bytes);
  ASSIGN_OR_RETURN(e.buffer_bytes, CheckedProduct(what, {batch_bytes, pool + 1}));
  const MemoryFormula formula =
      ComputeMemoryFormula(options.model, options.optimizer, static_cast<int>(batch));
  e.model_bytes = static_cast<uint64_t>(std::max<int64_t>(0, formula.total()));
  if (options.backend.device.Resolve().platform != device::Platform::kCuda) {
    // On the host (the CPU backend, and the sim backend's CPU kernels): what the backend really
    // allocates, workspace included, plus the initial model state the job holds beside it.
    const uint32_t world = std::max<uint32_t>(1, SliceOf(options).world_size);
    const int max_batch = static_cast<int>((batch + world - 1) / world);
    const uint64_t backend = CpuBackendAllocationBytes(options.model, options.optimizer, max_batch,
                                                       ComputeThreadsFor(options));
    const uint64_t state = static_cast<uint64_t>(std::max<int64_t>(0, formula.parameters));
    e.model_bytes = backend > UINT64_MAX - state ? UINT64_MAX : backend + state;
  }
  const uint64_t hw = static_cast<uint64_t>(HardwareThreads());
  const auto threads = [hw](int n) { return n > 0 ? static_cast<uint64_t>(n) : hw; };
  const PipelineResources& r = options.pipeline.resources;
  e.threads =
      std::max({threads(r.threads), threads(r.decompress_threads), threads(r.preprocess_threads)}) +
      threads(options.backend.cpu.threads);
  e.thread_bytes = e.threads * kAddressSpacePerThread;
  if (format.chain != nullptr) {
    e.scratch_bytes = 2 * threads(r.preprocess_threads) * format.chain->scratch_bytes();
  }
  return e;
}

absl::Status CheckRunFits(const TrainJobOptions& options, const Dataset& train) {
  const uint64_t batch = options.pipeline.order.batch_size;
  if (batch > train.record_count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch-size ", batch, " is larger than the training split (", train.record_count(),
        " records in ", train.manifest_path(), "): expected at most ", train.record_count()));
  }
  ASSIGN_OR_RETURN(const RunMemoryEstimate e, EstimateRunMemory(options, train));
  const uint64_t data_bytes =
      e.model_bytes > UINT64_MAX - e.buffer_bytes ? UINT64_MAX : e.model_bytes + e.buffer_bytes;
  RETURN_IF_ERROR(CheckMemory(
      absl::StrCat(
          "--batch-size ", batch, " with --layers ", absl::StrJoin(options.model.layers, ","),
          " (model, gradients, optimizer state, activations, backend workspace and batch buffers)"),
      data_bytes));
  // Under ulimit -v, every thread's stack, malloc arena and BLAS buffer counts too, and running
  // out of address space inside OpenBLAS spins instead of failing: refuse the run up front.
  if (AddressSpaceLimit() > 0) {
    const std::string scratch =
        e.scratch_bytes == 0
            ? ""
            : absl::StrCat(", ", FormatBytes(e.scratch_bytes),
                           " of transforms scratch for the train and test preprocess threads");
    RETURN_IF_ERROR(
        CheckMemory(absl::StrCat("this run (", FormatBytes(data_bytes), " of model and batches, ",
                                 e.threads, " threads x ", FormatBytes(kAddressSpacePerThread),
                                 " of stack, malloc arena and BLAS buffer", scratch,
                                 "; fewer --threads and --compute-threads need less)"),
                    data_bytes + e.thread_bytes + e.scratch_bytes));
  }
  return absl::OkStatus();
}

}  // namespace sluice
