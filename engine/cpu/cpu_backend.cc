// The CPU backend: the "device" is host memory, matrix products are OpenBLAS sgemm, and the
// first layer skips the zero pixels of the input with AVX-512 sparse kernels when the batch is
// sparse enough (see internal/cpu_kernels.h for why that pays).
//
// Threads: the batch is split into T slices computed by a WorkerTeam of T threads
// (internal/worker_team.h). Slice s gets a fixed run of rows that depends only on (batch size,
// T): the first B % T slices get B / T + 1 rows, the others B / T. Each slice runs forward, loss
// and backward on its rows with single-threaded sgemm and sparse kernels, into its own gradient
// buffers (slice 0 into grads_). Once every slice is done, the elements of every gradient are
// cut into a fixed number of chunks; each chunk is summed in slice order (g0 + g1 + ... +
// g{T-1}) and, outside data-parallel runs, stepped by the optimizer. Slices and chunks are
// claimed by whichever team thread gets to them first (a thread the OS has not scheduled delays
// nothing), but what each computes is fixed, so the result is bitwise the same for a given T,
// and T = 1 is exactly the single-threaded step. A data-parallel run exchanges the summed
// grads_ between the sum and the optimizer, as before.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "engine/backend.h"
#include "engine/cpu/internal/cpu_kernels.h"
#include "engine/cpu/internal/host_buffer.h"
#include "engine/cpu/internal/worker_team.h"

namespace sluice {
namespace {

using cpu_internal::HostBuffer;

// Above this density of nonzero inputs the dense sgemm is as fast as the sparse kernels.
constexpr double kMaxSparseDensity = 0.75;

// The first row of slice t of a batch of B rows split T ways, for t in [0, T].
int SliceBegin(int B, int T, int t) { return t * (B / T) + std::min(t, B % T); }
// Gradient chunks per thread for the sum and the optimizer: small enough that a thread the OS
// descheduled mid-chunk holds up little, large enough to amortize claiming one.
constexpr int kChunksPerThread = 4;

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& model, const OptimizerConfig& opt, const BackendOptions& options,
             int threads)
      : model_(model), opt_(opt), options_(options), threads_(threads) {
    const int L = model_.num_linear();
    const int max_batch = options_.max_batch;
    for (int k = 0; k < L; ++k) {
      const int64_t in = model_.layers[k];
      const int64_t out = model_.layers[k + 1];
      params_.emplace_back(&ledger_, MemoryTag::kParameters, in * out);
      params_.emplace_back(&ledger_, MemoryTag::kParameters, out);
      grads_.emplace_back(&ledger_, MemoryTag::kGradients, in * out);
      grads_.emplace_back(&ledger_, MemoryTag::kGradients, out);
      outputs_.emplace_back(&ledger_, MemoryTag::kActivations, max_batch * out);
      output_grads_.emplace_back(&ledger_, MemoryTag::kActivations, max_batch * out);
    }
    for (int s = 0; s < opt_.state_slots(); ++s) {
      for (size_t p = 0; p < params_.size(); ++p) {
        opt_state_.emplace_back(&ledger_, MemoryTag::kOptimizerState, params_[p].size());
      }
    }
    const int in0 = model_.layers[0];
    input_ = HostBuffer<float>(&ledger_, MemoryTag::kInputBatches, int64_t{max_batch} * in0);
    // Activations are shared (slice t uses its own rows of outputs_ and output_grads_); the
    // sparse-input lists and, past slice 0, the gradients are per slice (workspace: the
    // formula's gradients are grads_, which holds the sum).
    const int slice_rows = (max_batch + threads_ - 1) / threads_;
    slices_.resize(threads_);
    for (int t = 0; t < threads_; ++t) {
      Slice& sl = slices_[t];
      if (t > 0) {
        for (const HostBuffer<float>& g : grads_) {
          sl.grads.emplace_back(&ledger_, MemoryTag::kWorkspace, g.size());
        }
      }
      if (cpu_internal::SparseKernelsAvailable()) {
        const int64_t cells = int64_t{slice_rows} * in0;
        sl.row_index = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, cells + 16);
        sl.row_value = HostBuffer<float>(&ledger_, MemoryTag::kWorkspace, cells + 16);
        sl.row_nnz = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, slice_rows);
        sl.col_row = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, cells);
        sl.col_value = HostBuffer<float>(&ledger_, MemoryTag::kWorkspace, cells);
        sl.col_nnz = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, in0);
        sl.sparse = cpu_internal::SparseInput{
            sl.row_index.data(), sl.row_value.data(), sl.row_nnz.data(), sl.col_row.data(),
            sl.col_value.data(), sl.col_nnz.data(),   slice_rows,         in0};
      }
    }
    // Each slice calls sgemm on its own thread: OpenBLAS must not start threads of its own.
    openblas_set_num_threads(1);
    if (threads_ > 1) team_.emplace(threads_);
  }

  std::string name() const override {
    return absl::StrCat("cpu (OpenBLAS sgemm",
                        cpu_internal::SparseKernelsAvailable() ? ", AVX-512 sparse input" : "",
                        ", ", threads_, threads_ == 1 ? " thread)" : " threads, batch split)");
  }
  bool is_cuda() const override { return false; }
  int compute_threads() const override { return threads_; }

  absl::Status TrainStep(const BatchView& batch, float lr) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    ASSIGN_OR_RETURN(const int64_t global_samples, GlobalSamples(batch));
    if (global_samples == 0) return absl::OkStatus();  // every rank's share skipped as corrupt
    const int B = static_cast<int>(batch.size);
    if (B == 0) {  // this rank's share of the global batch is empty: it adds nothing
      for (HostBuffer<float>& g : grads_) std::fill(g.data(), g.data() + g.size(), 0.0f);
      RETURN_IF_ERROR(ExchangeGradients());
      ++optimizer_steps_;
      ApplyOptimizer(lr, 0, 1);
      return absl::OkStatus();
    }
    const int active = SplitRows(B);
    // Outside data-parallel runs, the optimizer runs in the team right after the sum (so the
    // step is counted before it); a data-parallel run steps after the exchange.
    const bool fused_optimizer = !distributed();
    if (fused_optimizer) ++optimizer_steps_;
    const int chunks = threads_ == 1 ? 0 : kChunksPerThread * threads_;
    std::atomic<int> next_slice{0}, slices_done{0}, next_chunk{0};
    RunTeam([&] {
      for (int t; (t = next_slice.fetch_add(1, std::memory_order_relaxed)) < active;) {
        Slice& sl = slices_[t];
        const float* x = PrepareInput(batch, sl);
        Forward(x, sl);
        const int L = model_.num_linear();
        const int C = model_.layers[L];
        sl.loss_sum = 0;
        sl.correct = 0;
        cpu_internal::SoftmaxCrossEntropy(
            outputs_[L - 1].data() + int64_t{sl.begin} * C, batch.labels + sl.begin, sl.rows, C,
            output_grads_[L - 1].data() + int64_t{sl.begin} * C,
            t == 0 ? &train_loss_sum_ : &sl.loss_sum, t == 0 ? &train_correct_ : &sl.correct,
            static_cast<int>(global_samples));
        Backward(x, t);
        slices_done.fetch_add(1, std::memory_order_release);
      }
      if (chunks == 0) return;
      cpu_internal::WorkerTeam::WaitUntil(
          [&] { return slices_done.load(std::memory_order_acquire) == active; });
      for (int c; (c = next_chunk.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
        SumSliceGradients(active, c, chunks);
        if (fused_optimizer) ApplyOptimizer(lr, c, chunks);
      }
    });
    for (int t = 1; t < active; ++t) {  // in slice order, so the sum is reproducible
      train_loss_sum_ += slices_[t].loss_sum;
      train_correct_ += slices_[t].correct;
    }
    train_samples_ += B;
    RETURN_IF_ERROR(ExchangeGradients());
    if (!fused_optimizer) ++optimizer_steps_;
    if (!fused_optimizer || threads_ == 1) ApplyOptimizer(lr, 0, 1);
    return absl::OkStatus();
  }

  absl::StatusOr<LossStats> TakeLoss() override {
    LossStats stats;
    stats.samples = train_samples_;
    stats.correct = train_correct_;
    stats.mean_loss = train_samples_ ? train_loss_sum_ / train_samples_ : 0.0;
    train_loss_sum_ = 0;
    train_samples_ = 0;
    train_correct_ = 0;
    return stats;
  }

  absl::Status Evaluate(const BatchView& batch, EvalStats* stats) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    if (batch.size == 0) return absl::OkStatus();
    const int B = static_cast<int>(batch.size);
    const int active = SplitRows(B);
    std::atomic<int> next_slice{0};
    RunTeam([&] {
      for (int t; (t = next_slice.fetch_add(1, std::memory_order_relaxed)) < active;) {
        Slice& sl = slices_[t];
        const float* x = PrepareInput(batch, sl);
        Forward(x, sl);
        const int L = model_.num_linear();
        const int C = model_.layers[L];
        sl.loss_sum = 0;
        sl.correct = 0;
        cpu_internal::SoftmaxCrossEntropy(outputs_[L - 1].data() + int64_t{sl.begin} * C,
                                          batch.labels + sl.begin, sl.rows, C, nullptr,
                                          t == 0 ? &stats->loss_sum : &sl.loss_sum,
                                          t == 0 ? &stats->correct : &sl.correct);
      }
    });
    for (int t = 1; t < active; ++t) {
      stats->loss_sum += slices_[t].loss_sum;
      stats->correct += slices_[t].correct;
    }
    stats->samples += B;
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::StatusOr<ModelState> SaveState() override {
    ModelState state;
    state.model = model_;
    state.optimizer_steps = optimizer_steps_;
    static constexpr const char* kSlotNames[2][2] = {{"momentum_buffer", ""},
                                                     {"exp_avg", "exp_avg_sq"}};
    const int kind = opt_.kind == OptimizerKind::kAdamW ? 1 : 0;
    for (size_t p = 0; p < params_.size(); ++p) {
      state.params.push_back(ToHost(ParamName(p), p, params_[p]));
    }
    for (size_t t = 0; t < opt_state_.size(); ++t) {
      const size_t p = t % params_.size();
      const int slot = static_cast<int>(t / params_.size());
      state.opt_state.push_back(
          ToHost(absl::StrCat(ParamName(p), ".", kSlotNames[kind][slot]), p, opt_state_[t]));
    }
    return state;
  }

  absl::Status LoadState(const ModelState& state) override {
    if (state.model.layers != model_.layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoadState: the state's layers (", absl::StrJoin(state.model.layers, ","),
                       ") differ from the backend's (", absl::StrJoin(model_.layers, ","), ")"));
    }
    if (state.params.size() != params_.size() || state.opt_state.size() != opt_state_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoadState: expected ", params_.size(), " parameter tensors and ", opt_state_.size(),
          " optimizer-state tensors (", opt_.state_slots(), " slots), got ", state.params.size(),
          " and ", state.opt_state.size()));
    }
    for (size_t p = 0; p < params_.size(); ++p) {
      RETURN_IF_ERROR(CheckShape(state.params[p], p));
    }
    for (size_t t = 0; t < opt_state_.size(); ++t) {
      RETURN_IF_ERROR(CheckShape(state.opt_state[t], t % params_.size()));
    }
    for (size_t p = 0; p < params_.size(); ++p) FromHost(state.params[p], p, &params_[p]);
    for (size_t t = 0; t < opt_state_.size(); ++t) {
      FromHost(state.opt_state[t], t % params_.size(), &opt_state_[t]);
    }
    optimizer_steps_ = state.optimizer_steps;
    return absl::OkStatus();
  }

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
    std::vector<HostBuffer<float>> grads;  // slices past 0: this slice's gradients
    HostBuffer<int32_t> row_index, row_nnz, col_row, col_nnz;
    HostBuffer<float> row_value, col_value;
    std::optional<cpu_internal::SparseInput> sparse;
  };

  // Sets every slice's rows for a batch of B; returns how many slices have rows (min(B, T)).
  int SplitRows(int B) {
    for (int t = 0; t < threads_; ++t) {
      slices_[t].begin = SliceBegin(B, threads_, t);
      slices_[t].rows = SliceBegin(B, threads_, t + 1) - slices_[t].begin;
    }
    return std::min(B, threads_);
  }

  void RunTeam(absl::FunctionRef<void()> fn) {
    if (team_) {
      team_->Run(fn);
    } else {
      fn();
    }
  }

  // grads_ += the gradients of slices 1 .. active-1, in that order, over chunk c of `chunks`
  // of every gradient's elements.
  void SumSliceGradients(int active, int c, int chunks) {
    for (size_t p = 0; p < grads_.size(); ++p) {
      const int64_t n = grads_[p].size();
      const int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      for (int s = 1; s < active; ++s) {
        cpu_internal::AddInPlace(slices_[s].grads[p].data() + lo, hi - lo, grads_[p].data() + lo);
      }
    }
  }

  static std::string ParamName(size_t p) {
    return absl::StrCat(2 * (p / 2), p % 2 == 0 ? ".weight" : ".bias");
  }

  // PyTorch layout of parameter p: weight [out, in], bias [out].
  std::vector<int64_t> TorchShape(size_t p) const {
    const int k = static_cast<int>(p / 2);
    if (p % 2 == 1) return {model_.layers[k + 1]};
    return {model_.layers[k + 1], model_.layers[k]};
  }

  absl::Status CheckShape(const HostTensor& t, size_t p) const {
    const std::vector<int64_t> shape = TorchShape(p);
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (t.shape != shape || static_cast<int64_t>(t.values.size()) != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoadState: tensor '", t.name, "' has shape [", absl::StrJoin(t.shape, ","), "] and ",
          t.values.size(), " values; expected [", absl::StrJoin(shape, ","), "]"));
    }
    return absl::OkStatus();
  }

  // Weights are kept input-major (W^T); checkpoints and exports use PyTorch's [out, in].
  HostTensor ToHost(std::string name, size_t p, const HostBuffer<float>& buf) const {
    HostTensor t{std::move(name), TorchShape(p), std::vector<float>(buf.size())};
    if (p % 2 == 1) {
      std::copy(buf.data(), buf.data() + buf.size(), t.values.begin());
    } else {
      const int in = model_.layers[p / 2], out = model_.layers[p / 2 + 1];
      for (int o = 0; o < out; ++o) {
        for (int i = 0; i < in; ++i) t.values[int64_t{o} * in + i] = buf.data()[int64_t{i} * out + o];
      }
    }
    return t;
  }

  void FromHost(const HostTensor& t, size_t p, HostBuffer<float>* buf) const {
    if (p % 2 == 1) {
      std::copy(t.values.begin(), t.values.end(), buf->data());
      return;
    }
    const int in = model_.layers[p / 2], out = model_.layers[p / 2 + 1];
    for (int o = 0; o < out; ++o) {
      for (int i = 0; i < in; ++i) buf->data()[int64_t{i} * out + o] = t.values[int64_t{o} * in + i];
    }
  }

  absl::Status CheckBatch(const BatchView& batch) const {
    if (batch.on_device) {
      return absl::InvalidArgumentError("the CPU backend got a device batch (on_device = true)");
    }
    if (batch.features != static_cast<uint32_t>(model_.layers[0])) {
      return absl::InvalidArgumentError(absl::StrCat("batch has ", batch.features,
                                                     " features per sample; the model takes ",
                                                     model_.layers[0]));
    }
    // A data-parallel rank's share of a step may be empty (the last global batch has fewer
    // samples than ranks, or its frames were skipped as corrupt); it still joins the exchange.
    const uint32_t min_size = distributed() ? 0 : 1;
    if (batch.size < min_size || batch.size > static_cast<uint32_t>(options_.max_batch)) {
      return absl::InvalidArgumentError(absl::StrCat("batch of ", batch.size,
                                                     " samples; the backend was created for ",
                                                     min_size, "..", options_.max_batch));
    }
    if (batch.size == 0) return absl::OkStatus();
    if (batch.samples == nullptr || batch.labels == nullptr) {
      return absl::InvalidArgumentError("batch without samples or labels");
    }
    const int classes = model_.layers.back();
    for (uint32_t b = 0; b < batch.size; ++b) {
      if (batch.labels[b] < 0 || batch.labels[b] >= classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "label ", batch.labels[b], " of sample ", b, " in batch (epoch ", batch.epoch,
            ", step ", batch.step, ") is outside [0, ", classes, ")"));
      }
    }
    return absl::OkStatus();
  }

  // The slice's rows of the batch as f32 (u8 and f16 are converted into its rows of input_).
  const float* PrepareInput(const BatchView& batch, const Slice& sl) {
    const int64_t first = int64_t{sl.begin} * batch.features;
    const int64_t n = int64_t{sl.rows} * batch.features;
    switch (batch.format) {
      case H2DFormat::kU8:
        cpu_internal::NormalizeU8(static_cast<const uint8_t*>(batch.samples) + first, n,
                                  options_.normalization.mean, options_.normalization.std,
                                  input_.data() + first);
        return input_.data() + first;
      case H2DFormat::kF16:
        cpu_internal::HalfToFloat(static_cast<const uint16_t*>(batch.samples) + first, n,
                                  input_.data() + first);
        return input_.data() + first;
      case H2DFormat::kF32:
        break;
    }
    return static_cast<const float*>(batch.samples) + first;  // normalized by the pipeline
  }

  // Layer k's outputs (or their gradients) for the slice's rows.
  float* Rows(std::vector<HostBuffer<float>>& buffers, int k, const Slice& sl) {
    return buffers[k].data() + int64_t{sl.begin} * model_.layers[k + 1];
  }

  // The slice's forward pass on its rows `x`; notes in sl.sparse_path whether the first layer
  // ran on the sparse kernels, which pays only for a sparse enough slice.
  void Forward(const float* x, Slice& sl) {
    const int L = model_.num_linear();
    const int B = sl.rows;
    sl.sparse_path = false;
    if (sl.sparse) {
      const int64_t nnz = cpu_internal::BuildSparseRows(x, B, model_.layers[0], &*sl.sparse);
      sl.sparse_path = nnz <= kMaxSparseDensity * B * model_.layers[0];
    }
    for (int k = 0; k < L; ++k) {
      const bool relu = k + 1 < L;
      const int in = model_.layers[k], out = model_.layers[k + 1];
      if (k == 0 && sl.sparse_path) {
        cpu_internal::SparseLinearForward(*sl.sparse, params_[0].data(), params_[1].data(), B,
                                          out, relu, Rows(outputs_, 0, sl), /*threads=*/1);
      } else {
        const float* layer_in = k == 0 ? x : Rows(outputs_, k - 1, sl);
        cpu_internal::DenseLinearForward(layer_in, params_[2 * k].data(),
                                         params_[2 * k + 1].data(), B, in, out, relu,
                                         Rows(outputs_, k, sl));
      }
    }
  }

  // Slice t's backward pass into its gradients (slice 0: grads_).
  void Backward(const float* x, int t) {
    Slice& sl = slices_[t];
    std::vector<HostBuffer<float>>& grads = t == 0 ? grads_ : sl.grads;
    const int B = sl.rows;
    for (int k = model_.num_linear() - 1; k >= 0; --k) {
      const int in = model_.layers[k], out = model_.layers[k + 1];
      const float* dy = Rows(output_grads_, k, sl);
      cpu_internal::BiasGrad(dy, B, out, grads[2 * k + 1].data());
      if (k == 0 && sl.sparse_path) {
        cpu_internal::BuildSparseColumns(B, in, &*sl.sparse);
        cpu_internal::SparseWeightGrad(*sl.sparse, dy, in, out, grads[0].data(), /*threads=*/1);
        continue;
      }
      const float* layer_in = k == 0 ? x : Rows(outputs_, k - 1, sl);
      float* dx = k > 0 ? Rows(output_grads_, k - 1, sl) : nullptr;
      cpu_internal::DenseLinearBackward(layer_in, params_[2 * k].data(), dy, B, in, out,
                                        grads[2 * k].data(), dx);
      if (dx != nullptr) {
        cpu_internal::ReluBackwardInPlace(Rows(outputs_, k - 1, sl), int64_t{B} * in, dx);
      }
    }
  }

  bool distributed() const {
    return options_.gradient_comm != nullptr &&
           (options_.gradient_comm->is_distributed() || options_.exchange_in_world_of_one);
  }

  // The samples of the whole global batch: this batch's in a single process, else the sum of
  // every rank's share (a rank may have skipped corrupt frames, so the plan's global_size is
  // not enough for an exact mean).
  absl::StatusOr<int64_t> GlobalSamples(const BatchView& batch) {
    int64_t n = batch.size;
    if (!distributed()) return n;
    const int64_t t0 = NowNs();
    RETURN_IF_ERROR(options_.gradient_comm->AllReduceSum(&n, 1));
    exchange_.count_ns += NowNs() - t0;
    return n;
  }

  // THE GRADIENT EXCHANGE POINT. Runs after backward and before the optimizer step, with every
  // gradient in grads_ complete: each holds this rank's sum over its samples divided by the
  // global batch's size, so their sum over the ranks is the global batch's mean.
  absl::Status ExchangeGradients() {
    if (!distributed()) return absl::OkStatus();
    const int64_t t0 = NowNs();
    for (HostBuffer<float>& g : grads_) {
      RETURN_IF_ERROR(options_.gradient_comm->AllReduceSum(g.data(), g.size()));
      exchange_.bytes += static_cast<int64_t>(g.size() * sizeof(float));
    }
    exchange_.busy_ns += NowNs() - t0;
    ++exchange_.steps;
    return absl::OkStatus();
  }

  static int64_t NowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // The optimizer step (optimizer_steps_ already counts it) on part t of `parts` of every
  // parameter's elements; element-wise, so the split does not change the result.
  void ApplyOptimizer(float lr, int t, int parts) {
    const size_t num_params = params_.size();
    for (size_t p = 0; p < num_params; ++p) {
      const int64_t n = params_[p].size();
      const int64_t lo = n * t / parts, hi = n * (t + 1) / parts;
      if (opt_.kind == OptimizerKind::kAdamW) {
        cpu_internal::AdamWUpdate(params_[p].data() + lo, grads_[p].data() + lo,
                                  opt_state_[p].data() + lo, opt_state_[num_params + p].data() + lo,
                                  hi - lo, lr, opt_.beta1, opt_.beta2, opt_.eps,
                                  opt_.weight_decay, optimizer_steps_);
      } else {
        float* momentum = opt_state_.empty() ? nullptr : opt_state_[p].data() + lo;
        cpu_internal::SgdUpdate(params_[p].data() + lo, grads_[p].data() + lo, momentum, hi - lo,
                                lr, opt_.momentum, opt_.nesterov, opt_.weight_decay,
                                optimizer_steps_ == 1);
      }
    }
  }

  const ModelConfig model_;
  const OptimizerConfig opt_;
  const BackendOptions options_;
  const int threads_;
  MemoryLedger ledger_;  // declared before every buffer: buffers report to it when destroyed
  std::vector<HostBuffer<float>> params_, grads_, opt_state_, outputs_, output_grads_;
  HostBuffer<float> input_;
  std::vector<Slice> slices_;  // threads_ of them
  std::optional<cpu_internal::WorkerTeam> team_;  // threads_ > 1
  int64_t optimizer_steps_ = 0;
  double train_loss_sum_ = 0;
  int64_t train_samples_ = 0;
  int64_t train_correct_ = 0;
  ExchangeStats exchange_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelState& state,
                                                          const OptimizerConfig& opt,
                                                          const BackendOptions& options) {
  if (options.precision != Precision::kF32) {
    return absl::InvalidArgumentError(
        "the CPU backend computes in fp32 only; use --precision fp32 (bf16/fp16 need --device "
        "cuda)");
  }
  if (options.max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be >= 1, got ",
                                                   options.max_batch));
  }
  if (state.model.layers.size() < 2) {
    return absl::InvalidArgumentError("the model needs at least two layer sizes");
  }
  if (options.normalization.std == 0.0f) {
    return absl::InvalidArgumentError("normalization std must be nonzero");
  }
  int threads = options.threads;
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", threads));
  }
  if (threads == 0) threads = UsableCores();
  auto backend = std::make_unique<CpuBackend>(state.model, opt, options, threads);
  RETURN_IF_ERROR(backend->LoadState(state));
  return backend;
}

}  // namespace sluice
