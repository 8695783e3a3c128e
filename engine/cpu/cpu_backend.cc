// The CPU backend: the "device" is host memory, matrix products are OpenBLAS sgemm, and the
// first layer skips the zero pixels of the input with AVX-512 sparse kernels when the batch is
// sparse enough (see internal/cpu_kernels.h for why that pays).
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
#include "engine/cpu/cpu_backend.h"
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
// Fewer input rows per weight-gradient chunk would leave sgemm too little to amortize packing
// dY.
constexpr int kMinChunkRows = 16;

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
    // sparse-input lists and, past slice 0, the first layer's sparse weight gradients are per
    // slice (workspace: the formula's gradients are grads_, which holds the sum).
    const int slice_rows = (max_batch + threads_ - 1) / threads_;
    slices_.resize(threads_);
    for (int t = 0; t < threads_; ++t) {
      Slice& sl = slices_[t];
      if (t > 0 && per_slice_dw0_) {
        sl.dw0 = HostBuffer<float>(&ledger_, MemoryTag::kWorkspace, grads_[0].size());
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
    // Each slice and item calls sgemm on its own thread: OpenBLAS must not start threads of
    // its own.
    openblas_set_num_threads(1);
    if (threads_ > 1) team_.emplace(threads_);
    PlanWeightItems();
  }

  std::string name() const override {
    return absl::StrCat("cpu (OpenBLAS sgemm",
                        cpu_internal::SparseKernelsAvailable() ? ", AVX-512 sparse input" : "",
                        ", ", threads_, threads_ == 1 ? " thread)" : " threads, batch split)");
  }
  device::Platform platform() const override { return device::Platform::kCpu; }
  int compute_threads() const override { return threads_; }
  int64_t helper_cpu_ns() const override { return team_ ? team_->team_cpu_ns() : 0; }

  absl::Status TrainStep(const BatchView& batch, float lr) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    ASSIGN_OR_RETURN(const int64_t global_samples, GlobalSamples(batch));
    if (global_samples == 0) return absl::OkStatus();  // every rank's share skipped as corrupt
    const int B = static_cast<int>(batch.size);
    if (B == 0) {  // this rank's share of the global batch is empty: it adds nothing
      for (HostBuffer<float>& g : grads_) std::fill(g.data(), g.data() + g.size(), 0.0f);
      RETURN_IF_ERROR(ExchangeGradients());
      ++optimizer_steps_;
      ApplyOptimizerAll(lr);
      return absl::OkStatus();
    }
    const int active = SplitRows(B);
    // Outside data-parallel runs, the optimizer steps each item's rows right after computing
    // their gradient (so the step is counted before it); a data-parallel run steps after the
    // exchange.
    const bool fused_optimizer = !distributed();
    if (fused_optimizer) ++optimizer_steps_;
    const float* x0 = nullptr;  // the first layer's input, whole batch (set by slice 0)
    std::atomic<int> next_slice{0}, slices_done{0}, next_item{0};
    const int items = static_cast<int>(items_.size());
    RunTeam([&] {
      for (int t; (t = next_slice.fetch_add(1, std::memory_order_relaxed)) < active;) {
        Slice& sl = slices_[t];
        const float* x = PrepareInput(batch, sl);
        if (t == 0) x0 = x;  // slice 0 starts at row 0: its input is the whole batch's
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
        BackwardRows(x, sl, t);
        slices_done.fetch_add(1, std::memory_order_release);
      }
      if (threads_ > 1) {
        cpu_internal::WorkerTeam::WaitUntil(
            [&] { return slices_done.load(std::memory_order_acquire) == active; });
      }
      for (int i; (i = next_item.fetch_add(1, std::memory_order_relaxed)) < items;) {
        const WeightItem& item = items_[i];
        if (fused_optimizer && plain_sgd_ && item.kind == WeightItem::kWeightRows) {
          RunWeightItem(item, B, active, x0, lr);  // gradient and step in one sgemm
          continue;
        }
        RunWeightItem(item, B, active, x0);
        if (fused_optimizer) ApplyOptimizer(item.param, item.lo, item.hi, lr);
      }
    });
    for (int t = 1; t < active; ++t) {  // in slice order, so the sum is reproducible
      train_loss_sum_ += slices_[t].loss_sum;
      train_correct_ += slices_[t].correct;
    }
    train_samples_ += B;
    RETURN_IF_ERROR(ExchangeGradients());
    if (!fused_optimizer) {
      ++optimizer_steps_;
      ApplyOptimizerAll(lr);
    }
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
    HostBuffer<float> dw0;  // slices past 0, sparse kernels: this slice's first-layer dW^T
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

  // A phase-2 item: elements [lo, hi) of parameter `param` (a weight's rows [lo / O, hi / O)).
  struct WeightItem {
    enum Kind { kWeightRows, kBias, kSumSlices } kind;
    int layer;
    int param;
    int64_t lo, hi;
  };

  // The phase-2 items, fixed by the model and T: each weight's input rows in about
  // kChunksPerThread * T chunks (whole rows, at least kMinChunkRows each), each bias whole, and
  // with per-slice first-layer gradients, that weight's elements in as many chunks.
  void PlanWeightItems() {
    const int target = threads_ == 1 ? 1 : kChunksPerThread * threads_;
    for (int k = 0; k < model_.num_linear(); ++k) {
      const int in = model_.layers[k], out = model_.layers[k + 1];
      const bool sum = k == 0 && per_slice_dw0_;
      const int64_t units = sum ? int64_t{in} * out : in;
      const int64_t min_units = sum ? int64_t{kMinChunkRows} * out : kMinChunkRows;
      const int64_t chunks = std::clamp<int64_t>(units / min_units, 1, target);
      const int64_t scale = sum ? 1 : out;  // units -> elements
      for (int64_t c = 0; c < chunks; ++c) {
        items_.push_back({sum ? WeightItem::kSumSlices : WeightItem::kWeightRows, k, 2 * k,
                          units * c / chunks * scale, units * (c + 1) / chunks * scale});
      }
      items_.push_back({WeightItem::kBias, k, 2 * k + 1, 0, out});
    }
  }

  // Computes item's gradient elements over the whole batch of B rows (`x`: the first layer's
  // input, whole batch). With `sgd_lr` (kWeightRows only), steps the weight rows by plain SGD
  // instead, without storing their gradient.
  void RunWeightItem(const WeightItem& item, int B, int active, const float* x,
                     std::optional<float> sgd_lr = std::nullopt) {
    const int k = item.layer;
    const int in = model_.layers[k], out = model_.layers[k + 1];
    switch (item.kind) {
      case WeightItem::kBias:
        cpu_internal::BiasGrad(output_grads_[k].data(), B, out, grads_[item.param].data());
        return;
      case WeightItem::kWeightRows:
        if (sgd_lr) {
          cpu_internal::DenseSgdStepRows(k == 0 ? x : outputs_[k - 1].data(),
                                         output_grads_[k].data(), B, in, out,
                                         static_cast<int>(item.lo / out),
                                         static_cast<int>(item.hi / out), *sgd_lr,
                                         params_[item.param].data());
          return;
        }
        cpu_internal::DenseWeightGradRows(k == 0 ? x : outputs_[k - 1].data(),
                                          output_grads_[k].data(), B, in, out,
                                          static_cast<int>(item.lo / out),
                                          static_cast<int>(item.hi / out), grads_[item.param].data());
        return;
      case WeightItem::kSumSlices:  // grads_[0] (slice 0's) += slices 1 .. active-1, in order
        for (int s = 1; s < active; ++s) {
          cpu_internal::AddInPlace(slices_[s].dw0.data() + item.lo, item.hi - item.lo,
                                   grads_[0].data() + item.lo);
        }
        return;
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

  // Slice t's backward pass through the activations on its rows: each layer's dY (in
  // output_grads_) and ReLU; the weight gradients are phase 2's, except the first layer's on
  // the per-slice path (into grads_[0] for slice 0, the slice's dw0 past it).
  void BackwardRows(const float* x, Slice& sl, int t) {
    const int B = sl.rows;
    for (int k = model_.num_linear() - 1; k >= 1; --k) {
      const int in = model_.layers[k], out = model_.layers[k + 1];
      float* dx = Rows(output_grads_, k - 1, sl);
      cpu_internal::DenseInputGrad(params_[2 * k].data(), Rows(output_grads_, k, sl), B, in, out,
                                   dx);
      cpu_internal::ReluBackwardInPlace(Rows(outputs_, k - 1, sl), int64_t{B} * in, dx);
    }
    if (!per_slice_dw0_) return;
    const int in = model_.layers[0], out = model_.layers[1];
    float* dw0 = t == 0 ? grads_[0].data() : sl.dw0.data();
    const float* dy = Rows(output_grads_, 0, sl);
    if (sl.sparse_path) {
      cpu_internal::BuildSparseColumns(B, in, &*sl.sparse);
      cpu_internal::SparseWeightGrad(*sl.sparse, dy, in, out, dw0, /*threads=*/1);
    } else {
      cpu_internal::DenseWeightGradRows(x, dy, B, in, out, 0, in, dw0);
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

  // The optimizer step (optimizer_steps_ already counts it) on elements [lo, hi) of parameter
  // p; element-wise, so a split does not change the result.
  void ApplyOptimizer(int p, int64_t lo, int64_t hi, float lr) {
    const size_t num_params = params_.size();
    if (opt_.kind == OptimizerKind::kAdamW) {
      cpu_internal::AdamWUpdate(params_[p].data() + lo, grads_[p].data() + lo,
                                opt_state_[p].data() + lo, opt_state_[num_params + p].data() + lo,
                                hi - lo, lr, opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay,
                                optimizer_steps_);
    } else {
      float* momentum = opt_state_.empty() ? nullptr : opt_state_[p].data() + lo;
      cpu_internal::SgdUpdate(params_[p].data() + lo, grads_[p].data() + lo, momentum, hi - lo,
                              lr, opt_.momentum, opt_.nesterov, opt_.weight_decay,
                              optimizer_steps_ == 1);
    }
  }

  void ApplyOptimizerAll(float lr) {
    for (size_t p = 0; p < params_.size(); ++p) {
      ApplyOptimizer(static_cast<int>(p), 0, params_[p].size(), lr);
    }
  }

  const ModelConfig model_;
  const OptimizerConfig opt_;
  const BackendOptions options_;
  const int threads_;
  // The first layer's weight gradient is computed per slice and summed (the AVX-512 sparse
  // kernels work from a slice's column lists).
  const bool per_slice_dw0_ = cpu_internal::SparseKernelsAvailable();
  // SGD without momentum or weight decay: a dense weight's step is fused into its gradient's
  // sgemm (outside data-parallel runs, which need the gradient itself for the exchange).
  const bool plain_sgd_ = opt_.kind == OptimizerKind::kSgd && opt_.momentum == 0.0f &&
                          opt_.weight_decay == 0.0f;
  MemoryLedger ledger_;  // declared before every buffer: buffers report to it when destroyed
  std::vector<HostBuffer<float>> params_, grads_, opt_state_, outputs_, output_grads_;
  HostBuffer<float> input_;
  std::vector<Slice> slices_;  // threads_ of them
  std::optional<cpu_internal::WorkerTeam> team_;  // threads_ > 1
  std::vector<WeightItem> items_;                 // phase 2, in a fixed order
  int64_t optimizer_steps_ = 0;
  double train_loss_sum_ = 0;
  int64_t train_samples_ = 0;
  int64_t train_correct_ = 0;
  ExchangeStats exchange_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelState& state,
                                                          const OptimizerConfig& opt,
                                                          const BackendOptions& options,
                                                          const CpuBackendOptions& cpu) {
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
  int threads = cpu.threads;
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", threads));
  }
  if (threads == 0) threads = UsableCores();
  auto backend = std::make_unique<CpuBackend>(state.model, opt, options, threads);
  RETURN_IF_ERROR(backend->LoadState(state));
  return backend;
}

}  // namespace sluice
