// CpuBackend: the Backend of engine/backend.h on the host (created by CreateCpuBackend). The
// "device" is host memory, matrix products are OpenBLAS sgemm, and the first layer skips the
// zero pixels of the input with AVX-512 sparse kernels when the batch is sparse enough (see
// cpu_kernels.h for why that pays). The class is private to the CPU backend; its parts live in
// three files: engine/cpu/cpu_backend.cc (construction from the BackendOptions, the batch
// checks and input conversion, the gradient exchange, CreateCpuBackend), cpu_backend_step.cc
// (the training and evaluation step in its two phases, the optimizer) and
// cpu_backend_state.cc (SaveState / LoadState and the PyTorch layout).
//
// Threads: a step runs on a WorkerTeam of T threads (internal/worker_team.h) in two phases.
//  1. Rows. The batch is cut into T slices; slice s gets a fixed run of rows that depends only
//     on (batch size, T): the first B % T slices get B / T + 1 rows, the others B / T. Each
//     slice runs forward, loss and the backward pass through the activations (dY of every
//     layer, dX = dY W) on its rows: every one of these is row-local.
//  2. Weights. Once every slice is done, each layer's weight gradient dW^T = X^T dY is cut by
//     its input rows into fixed chunks (and each bias is one item); an item computes its rows
//     over the whole batch (one sgemm, nothing to sum across threads) and, outside
//     data-parallel runs, steps the optimizer on those rows while they are in cache.
// Slices and items are claimed by whichever team thread gets to them first (a thread the OS has
// not scheduled delays nothing), but what each computes is fixed by (B, T), so the result is
// bitwise the same for a given T, and T = 1 is exactly the single-threaded step.
// The exception is the first layer's weight gradient on the AVX-512 sparse kernels: each slice
// computes its own from its column lists (phase 1), and phase 2 sums the slices' gradients in
// slice order, in element chunks. A data-parallel run exchanges grads_ after phase 2 and then
// steps the optimizer.
//
// Thread safety: one thread at a time (as every Backend).
#ifndef SLUICE_ENGINE_CPU_INTERNAL_CPU_BACKEND_IMPL_H_
#define SLUICE_ENGINE_CPU_INTERNAL_CPU_BACKEND_IMPL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/internal/cpu_kernels.h"
#include "engine/cpu/internal/host_buffer.h"
#include "engine/cpu/internal/worker_team.h"

namespace sluice::cpu_internal {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& model, const OptimizerConfig& opt, const BackendOptions& options,
             int threads, bool fused_sgd);

  std::string name() const override;
  device::Platform platform() const override { return device::Platform::kCpu; }
  int compute_threads() const override { return threads_; }
  int64_t helper_cpu_ns() const override { return team_ ? team_->team_cpu_ns() : 0; }

  absl::Status TrainStep(const BatchView& batch, float lr) override;
  absl::StatusOr<LossStats> TakeLoss() override;
  absl::Status Evaluate(const BatchView& batch, EvalStats* stats) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<ModelState> SaveState() override;
  absl::Status LoadState(const ModelState& state) override;
  MemoryReport memory() const override { return ledger_.report(); }
  ExchangeStats exchange() const override { return exchange_; }

 private:
  // One slice of the batch: its rows, and what it computes on its own thread.
  struct Slice {
    int begin = 0;
    int rows = 0;
    bool sparse_path = false;  // the first layer ran on the sparse kernels (Backward matches)
    double loss_sum = 0;       // slices past 0 (slice 0 adds into the backend's totals)
    int64_t correct = 0;
    HostBuffer<float> dw0;  // slices past 0, sparse kernels: this slice's first-layer dW^T
    HostBuffer<int32_t> row_index, row_nnz, col_row, col_nnz;
    HostBuffer<float> row_value, col_value;
    std::optional<SparseInput> sparse;
  };

  // A phase-2 item: elements [lo, hi) of parameter `param` (a weight's rows [lo / O, hi / O)).
  struct WeightItem {
    enum Kind { kWeightRows, kBias, kSumSlices } kind;
    int layer;
    int param;
    int64_t lo, hi;
  };

  // The caller's side (cpu_backend.cc): what the options allow, and the gradient exchange.
  absl::Status CheckBatch(const BatchView& batch) const;
  const float* PrepareInput(const BatchView& batch, const Slice& sl);
  bool distributed() const;
  absl::StatusOr<int64_t> GlobalSamples(const BatchView& batch);
  absl::Status ExchangeGradients();

  // The step (cpu_backend_step.cc).
  int SplitRows(int B);
  void RunTeam(absl::FunctionRef<void()> fn);
  void PlanWeightItems();
  void RunWeightItem(const WeightItem& item, int B, int active, const float* x,
                     std::optional<float> sgd_lr = std::nullopt);
  float* Rows(std::vector<HostBuffer<float>>& buffers, int k, const Slice& sl);
  void Forward(const float* x, Slice& sl);
  void BackwardRows(const float* x, Slice& sl, int t);
  void ApplyOptimizer(int p, int64_t lo, int64_t hi, float lr);
  void ApplyOptimizerAll(float lr);

  // Checkpoint state (cpu_backend_state.cc).
  static std::string ParamName(size_t p);
  std::vector<int64_t> TorchShape(size_t p) const;
  absl::Status CheckShape(const HostTensor& t, size_t p) const;
  HostTensor ToHost(std::string name, size_t p, const HostBuffer<float>& buf) const;
  void FromHost(const HostTensor& t, size_t p, HostBuffer<float>* buf) const;

  const ModelConfig model_;
  const OptimizerConfig opt_;
  const BackendOptions options_;
  const int threads_;
  // The first layer's weight gradient is computed per slice and summed (the AVX-512 sparse
  // kernels work from a slice's column lists).
  const bool per_slice_dw0_ = SparseKernelsAvailable();
  // SGD without momentum or weight decay, with CpuBackendOptions::fused_sgd: a dense weight's
  // step is fused into its gradient's sgemm (outside data-parallel runs, which need the
  // gradient itself for the exchange).
  const bool fused_sgd_;
  MemoryLedger ledger_;  // declared before every buffer: buffers report to it when destroyed
  std::vector<HostBuffer<float>> params_, grads_, opt_state_, outputs_, output_grads_;
  HostBuffer<float> input_;
  std::vector<Slice> slices_;       // threads_ of them
  std::optional<WorkerTeam> team_;  // threads_ > 1
  std::vector<WeightItem> items_;   // phase 2, in a fixed order
  int64_t optimizer_steps_ = 0;
  double train_loss_sum_ = 0;
  int64_t train_samples_ = 0;
  int64_t train_correct_ = 0;
  ExchangeStats exchange_;
};

}  // namespace sluice::cpu_internal

#endif  // SLUICE_ENGINE_CPU_INTERNAL_CPU_BACKEND_IMPL_H_
