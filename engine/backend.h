// Backend: runs training and evaluation steps of an MLP on one device (CPU or one CUDA GPU).
//
// A step is: forward, loss, backward, gradient exchange (data-parallel runs: a sum over the
// ranks of BackendOptions::gradient_comm), optimizer update. On CUDA the whole step is enqueued
// on the compute stream (after waiting on the batch's ready_event) and TrainStep returns
// without synchronizing. Backends are created by their platform's Create function, or by
// CreateBackend (engine/backend_factory.h) from a DeviceSpec.
//
// Errors: kInvalidArgument for a batch that does not fit the model (features, size > max batch,
// label out of range is reported by TakeLoss), kResourceExhausted for out-of-memory,
// kUnavailable when the device is missing, kInternal for a failed CUDA/cuBLAS call
// (file:line in the message).
// Thread safety: a Backend is used by one thread at a time.
#ifndef SLUICE_ENGINE_BACKEND_H_
#define SLUICE_ENGINE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "engine/dist/communicator.h"
#include "engine/memory.h"
#include "engine/model.h"
#include "pipeline/batch.h"

namespace sluice {

enum class Precision { kF32, kBF16, kF16 };
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);  // "fp32" | "bf16" | "fp16"

// What every platform's backend is given (each platform's own settings are in its header:
// engine/cpu/cpu_backend.h, engine/cuda/cuda_backend.h, engine/sim/sim_backend.h; the factory
// that picks one from a DeviceSpec is engine/backend_factory.h).
struct BackendOptions {
  int max_batch = 32;  // largest batch TrainStep/Evaluate will see
  // The compute precision (fp32 master weights). The CPU and sim backends compute in fp32
  // only and refuse the others.
  Precision precision = Precision::kF32;
  // Data-parallel training (docs/distributed.md): the ranks whose gradients are summed at every
  // step; borrowed, must outlive the backend, and used by the thread that runs the steps (the
  // device's compute stream on the sim backend), so give the backend a Duplicate() of the
  // world. Each step's loss gradient is divided by the number of samples of the whole global
  // batch (summed over the ranks first), so the summed gradients are the mean over the global
  // batch, as one process with that batch computes (up to float summation order). A rank whose
  // share of a step is empty (BatchView::size 0) contributes zero gradients. Null or a world of
  // one: no exchange. The CUDA backend sums through NCCL, bootstrapped over this communicator.
  dist::Communicator* gradient_comm = nullptr;
  // Run the exchange even in a world of one (a sum over one rank changes nothing): executes the
  // exchange path, NCCL included, on one process (tests, scripts/gpu-runner.sh).
  bool exchange_in_world_of_one = false;
};

using dist::ExchangeStats;

struct LossStats {
  double mean_loss = 0;  // mean per-sample loss over the steps since the last TakeLoss
  int64_t samples = 0;
  int64_t correct = 0;  // training predictions that matched the label
};

struct EvalStats {
  double loss_sum = 0;
  int64_t samples = 0;
  int64_t correct = 0;
  double accuracy() const { return samples ? static_cast<double>(correct) / samples : 0.0; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu (OpenBLAS, 2 threads)" or "cuda:0 (NVIDIA H200, sm_90)".
  virtual std::string name() const = 0;
  // Where the steps run: kCpu, kCuda or kSim.
  virtual device::Platform platform() const = 0;
  // Host threads that compute each step (the CPU backend's team; 1 for device backends, whose
  // host thread only enqueues).
  virtual int compute_threads() const { return 1; }
  // CPU time, cumulative, of the threads the backend computes on besides the caller's (the CPU
  // backend's worker team, spinning included); a step's CPU time is the caller's own plus the
  // change of this across it. 0 for backends without such threads.
  virtual int64_t helper_cpu_ns() const { return 0; }

  // One optimizer step on `batch` with learning rate `lr`. A host batch (on_device false) may
  // be reused or freed as soon as TrainStep returns (the CPU backend is done with it; a device
  // backend has copied or staged it). A device batch must stay valid until the step has
  // completed on compute_stream(): release it with that stream (BatchLease::Release), which
  // records an event there. The step waits for batch.ready_event on the device first.
  virtual absl::Status TrainStep(const BatchView& batch, float lr) = 0;
  // Loss/accuracy accumulated since the last call; synchronizes with the device.
  virtual absl::StatusOr<LossStats> TakeLoss() = 0;
  // Forward only; adds the batch's loss sum and correct count to `stats`.
  virtual absl::Status Evaluate(const BatchView& batch, EvalStats* stats) = 0;
  // Waits for all enqueued work.
  virtual absl::Status Synchronize() = 0;

  // Copies the model and optimizer state to the host (device -> host).
  virtual absl::StatusOr<ModelState> SaveState() = 0;
  // Replaces the model and optimizer state (host -> device). Shapes must match.
  virtual absl::Status LoadState(const ModelState& state) = 0;

  // Bytes allocated per tag, and the peak, as the backend's allocator recorded them.
  virtual MemoryReport memory() const = 0;

  // The gradient exchange's statistics (data-parallel runs).
  virtual ExchangeStats exchange() const { return {}; }

  // Where this backend's batches must be: its device (borrowed from the backend, valid while
  // it lives), or null for host memory (the CPU backend). A pipeline feeding this backend
  // takes its Placement from here (engine/job/train_job.cc), so the two cannot disagree.
  virtual device::Device* device() const { return nullptr; }
  // The stream the steps run on: device batches are released with it, so their slot is
  // reused only after the step that read it completed. Null on the CPU (TrainStep returns
  // when the step is done).
  virtual device::Stream* compute_stream() const { return nullptr; }
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_BACKEND_H_
