// CpuBackend's step (internal/cpu_backend_impl.h describes its two phases): TrainStep and
// Evaluate run the batch's row slices on the worker team (forward, loss and the backward pass
// through the activations), then the weight-gradient items of phase 2, each stepping the
// optimizer on its rows while they are in cache (outside data-parallel runs). Here too are the
// fixed split of rows and items, which makes the result depend only on (B, T), and the
// optimizer's element-wise update.
#include <algorithm>
#include <atomic>
#include <optional>
#include <vector>

#include "common/status_macros.h"
#include "engine/cpu/internal/cpu_backend_impl.h"

namespace sluice::cpu_internal {
namespace {

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

}  // namespace

absl::Status CpuBackend::TrainStep(const BatchView& batch, float lr) {
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
      SoftmaxCrossEntropy(outputs_[L - 1].data() + int64_t{sl.begin} * C, batch.labels + sl.begin,
                          sl.rows, C, output_grads_[L - 1].data() + int64_t{sl.begin} * C,
                          t == 0 ? &train_loss_sum_ : &sl.loss_sum,
                          t == 0 ? &train_correct_ : &sl.correct, static_cast<int>(global_samples));
      BackwardRows(x, sl, t);
      slices_done.fetch_add(1, std::memory_order_release);
    }
    if (threads_ > 1) {
      WorkerTeam::WaitUntil([&] { return slices_done.load(std::memory_order_acquire) == active; });
    }
    for (int i; (i = next_item.fetch_add(1, std::memory_order_relaxed)) < items;) {
      const WeightItem& item = items_[i];
      if (fused_optimizer && fused_sgd_ && item.kind == WeightItem::kWeightRows) {
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

absl::StatusOr<LossStats> CpuBackend::TakeLoss() {
  LossStats stats;
  stats.samples = train_samples_;
  stats.correct = train_correct_;
  stats.mean_loss = train_samples_ ? train_loss_sum_ / train_samples_ : 0.0;
  train_loss_sum_ = 0;
  train_samples_ = 0;
  train_correct_ = 0;
  return stats;
}

absl::Status CpuBackend::Evaluate(const BatchView& batch, EvalStats* stats) {
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
      SoftmaxCrossEntropy(outputs_[L - 1].data() + int64_t{sl.begin} * C, batch.labels + sl.begin,
                          sl.rows, C, nullptr, t == 0 ? &stats->loss_sum : &sl.loss_sum,
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

// Sets every slice's rows for a batch of B; returns how many slices have rows (min(B, T)).
int CpuBackend::SplitRows(int B) {
  for (int t = 0; t < threads_; ++t) {
    slices_[t].begin = SliceBegin(B, threads_, t);
    slices_[t].rows = SliceBegin(B, threads_, t + 1) - slices_[t].begin;
  }
  return std::min(B, threads_);
}

void CpuBackend::RunTeam(absl::FunctionRef<void()> fn) {
  if (team_) {
    team_->Run(fn);
  } else {
    fn();
  }
}

// The phase-2 items, fixed by the model and T: each weight's input rows in about
// kChunksPerThread * T chunks (whole rows, at least kMinChunkRows each), each bias whole, and
// with per-slice first-layer gradients, that weight's elements in as many chunks.
void CpuBackend::PlanWeightItems() {
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
void CpuBackend::RunWeightItem(const WeightItem& item, int B, int active, const float* x,
                               std::optional<float> sgd_lr) {
  const int k = item.layer;
  const int in = model_.layers[k], out = model_.layers[k + 1];
  switch (item.kind) {
    case WeightItem::kBias:
      BiasGrad(output_grads_[k].data(), B, out, grads_[item.param].data());
      return;
    case WeightItem::kWeightRows:
      if (sgd_lr) {
        DenseSgdStepRows(k == 0 ? x : outputs_[k - 1].data(), output_grads_[k].data(), B, in, out,
                         static_cast<int>(item.lo / out), static_cast<int>(item.hi / out), *sgd_lr,
                         params_[item.param].data());
        return;
      }
      DenseWeightGradRows(k == 0 ? x : outputs_[k - 1].data(), output_grads_[k].data(), B, in, out,
                          static_cast<int>(item.lo / out), static_cast<int>(item.hi / out),
                          grads_[item.param].data());
      return;
    case WeightItem::kSumSlices:  // grads_[0] (slice 0's) += slices 1 .. active-1, in order
      for (int s = 1; s < active; ++s) {
        AddInPlace(slices_[s].dw0.data() + item.lo, item.hi - item.lo, grads_[0].data() + item.lo);
      }
      return;
  }
}

// Layer k's outputs (or their gradients) for the slice's rows.
float* CpuBackend::Rows(std::vector<HostBuffer<float>>& buffers, int k, const Slice& sl) {
  return buffers[k].data() + int64_t{sl.begin} * model_.layers[k + 1];
}

// The slice's forward pass on its rows `x`; notes in sl.sparse_path whether the first layer
// ran on the sparse kernels, which pays only for a sparse enough slice.
void CpuBackend::Forward(const float* x, Slice& sl) {
  const int L = model_.num_linear();
  const int B = sl.rows;
  sl.sparse_path = false;
  if (sl.sparse) {
    const int64_t nnz = BuildSparseRows(x, B, model_.layers[0], &*sl.sparse);
    sl.sparse_path = nnz <= kMaxSparseDensity * B * model_.layers[0];
  }
  for (int k = 0; k < L; ++k) {
    const bool relu = k + 1 < L;
    const int in = model_.layers[k], out = model_.layers[k + 1];
    if (k == 0 && sl.sparse_path) {
      SparseLinearForward(*sl.sparse, params_[0].data(), params_[1].data(), B, out, relu,
                          Rows(outputs_, 0, sl), /*threads=*/1);
    } else {
      const float* layer_in = k == 0 ? x : Rows(outputs_, k - 1, sl);
      DenseLinearForward(layer_in, params_[2 * k].data(), params_[2 * k + 1].data(), B, in, out,
                         relu, Rows(outputs_, k, sl));
    }
  }
}

// Slice t's backward pass through the activations on its rows: each layer's dY (in
// output_grads_) and ReLU; the weight gradients are phase 2's, except the first layer's on
// the per-slice path (into grads_[0] for slice 0, the slice's dw0 past it).
void CpuBackend::BackwardRows(const float* x, Slice& sl, int t) {
  const int B = sl.rows;
  for (int k = model_.num_linear() - 1; k >= 1; --k) {
    const int in = model_.layers[k], out = model_.layers[k + 1];
    float* dx = Rows(output_grads_, k - 1, sl);
    DenseInputGrad(params_[2 * k].data(), Rows(output_grads_, k, sl), B, in, out, dx);
    ReluBackwardInPlace(Rows(outputs_, k - 1, sl), int64_t{B} * in, dx);
  }
  if (!per_slice_dw0_) return;
  const int in = model_.layers[0], out = model_.layers[1];
  float* dw0 = t == 0 ? grads_[0].data() : sl.dw0.data();
  const float* dy = Rows(output_grads_, 0, sl);
  if (sl.sparse_path) {
    BuildSparseColumns(B, in, &*sl.sparse);
    SparseWeightGrad(*sl.sparse, dy, in, out, dw0, /*threads=*/1);
  } else {
    DenseWeightGradRows(x, dy, B, in, out, 0, in, dw0);
  }
}

// The optimizer step (optimizer_steps_ already counts it) on elements [lo, hi) of parameter
// p; element-wise, so a split does not change the result.
void CpuBackend::ApplyOptimizer(int p, int64_t lo, int64_t hi, float lr) {
  const size_t num_params = params_.size();
  if (opt_.kind == OptimizerKind::kAdamW) {
    AdamWUpdate(params_[p].data() + lo, grads_[p].data() + lo, opt_state_[p].data() + lo,
                opt_state_[num_params + p].data() + lo, hi - lo, lr, opt_.beta1, opt_.beta2,
                opt_.eps, opt_.weight_decay, optimizer_steps_);
  } else {
    float* momentum = opt_state_.empty() ? nullptr : opt_state_[p].data() + lo;
    SgdUpdate(params_[p].data() + lo, grads_[p].data() + lo, momentum, hi - lo, lr, opt_.momentum,
              opt_.nesterov, opt_.weight_decay, optimizer_steps_ == 1);
  }
}

void CpuBackend::ApplyOptimizerAll(float lr) {
  for (size_t p = 0; p < params_.size(); ++p) {
    ApplyOptimizer(static_cast<int>(p), 0, params_[p].size(), lr);
  }
}

}  // namespace sluice::cpu_internal
