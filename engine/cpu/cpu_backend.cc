// The CPU backend: the "device" is host memory, matrix products are OpenBLAS sgemm, and the
// first layer skips the zero pixels of the input with AVX-512 sparse kernels when the batch is
// sparse enough (see internal/cpu_kernels.h for why that pays).
#include <cblas.h>

#include <algorithm>
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
#include "tbb/task_arena.h"

namespace sluice {
namespace {

using cpu_internal::HostBuffer;

// Above this density of nonzero inputs the dense sgemm is as fast as the sparse kernels.
constexpr double kMaxSparseDensity = 0.75;
// Models below this many parameters run on one thread by default: the other core feeds the
// pipeline, and two thread pools on two cores fight (the brief's PyTorch measurement).
constexpr int64_t kSmallModelParameters = 4'000'000;

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
    if (cpu_internal::SparseKernelsAvailable()) {
      const int64_t cells = int64_t{max_batch} * in0;
      row_index_ = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, cells + 16);
      row_value_ = HostBuffer<float>(&ledger_, MemoryTag::kWorkspace, cells + 16);
      row_nnz_ = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, max_batch);
      col_row_ = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, cells);
      col_value_ = HostBuffer<float>(&ledger_, MemoryTag::kWorkspace, cells);
      col_nnz_ = HostBuffer<int32_t>(&ledger_, MemoryTag::kWorkspace, in0);
      sparse_ = cpu_internal::SparseInput{row_index_.data(), row_value_.data(), row_nnz_.data(),
                                          col_row_.data(),   col_value_.data(), col_nnz_.data(),
                                          max_batch,         in0};
    }
    if (threads_ > 1) arena_.emplace(threads_);
    openblas_set_num_threads(threads_);
  }

  std::string name() const override {
    return absl::StrCat("cpu (OpenBLAS sgemm", sparse_ ? ", AVX-512 sparse input" : "", ", ",
                        threads_, threads_ == 1 ? " thread)" : " threads)");
  }
  bool is_cuda() const override { return false; }

  absl::Status TrainStep(const BatchView& batch, float lr) override {
    RETURN_IF_ERROR(CheckBatch(batch));
    ASSIGN_OR_RETURN(const int64_t global_samples, GlobalSamples(batch));
    if (global_samples == 0) return absl::OkStatus();  // every rank's share skipped as corrupt
    RunMaybeInArena([&] {
      const int B = static_cast<int>(batch.size);
      if (B == 0) {  // this rank's share of the global batch is empty: it adds nothing
        for (HostBuffer<float>& g : grads_) std::fill(g.data(), g.data() + g.size(), 0.0f);
        return;
      }
      const float* x = PrepareInput(batch);
      const bool sparse = Forward(x, B);
      const int L = model_.num_linear();
      cpu_internal::SoftmaxCrossEntropy(outputs_[L - 1].data(), batch.labels, B,
                                        model_.layers[L], output_grads_[L - 1].data(),
                                        &train_loss_sum_, &train_correct_,
                                        static_cast<int>(global_samples));
      train_samples_ += B;
      Backward(x, B, sparse);
    });
    RETURN_IF_ERROR(ExchangeGradients());
    ApplyOptimizer(lr);
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
    RunMaybeInArena([&] {
      const float* x = PrepareInput(batch);
      const int B = static_cast<int>(batch.size);
      Forward(x, B);
      const int L = model_.num_linear();
      cpu_internal::SoftmaxCrossEntropy(outputs_[L - 1].data(), batch.labels, B,
                                        model_.layers[L], nullptr, &stats->loss_sum,
                                        &stats->correct);
      stats->samples += B;
    });
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
  template <typename F>
  void RunMaybeInArena(F&& f) {
    if (arena_) {
      arena_->execute(f);
    } else {
      f();
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

  const float* PrepareInput(const BatchView& batch) {
    const int64_t n = int64_t{batch.size} * batch.features;
    switch (batch.format) {
      case H2DFormat::kU8:
        cpu_internal::NormalizeU8(static_cast<const uint8_t*>(batch.samples), n,
                                  options_.normalization.mean, options_.normalization.std,
                                  input_.data());
        return input_.data();
      case H2DFormat::kF16:
        cpu_internal::HalfToFloat(static_cast<const uint16_t*>(batch.samples), n, input_.data());
        return input_.data();
      case H2DFormat::kF32:
        break;
    }
    return static_cast<const float*>(batch.samples);  // already normalized by the pipeline
  }

  // Returns whether the first layer ran on the sparse path (Backward must match).
  bool Forward(const float* x, int B) {
    const int L = model_.num_linear();
    bool sparse = false;
    if (sparse_) {
      const int64_t nnz = cpu_internal::BuildSparseRows(x, B, model_.layers[0], &*sparse_);
      sparse = nnz <= kMaxSparseDensity * B * model_.layers[0];
    }
    for (int k = 0; k < L; ++k) {
      const bool relu = k + 1 < L;
      const int in = model_.layers[k], out = model_.layers[k + 1];
      if (k == 0 && sparse) {
        cpu_internal::SparseLinearForward(*sparse_, params_[0].data(), params_[1].data(), B, out,
                                          relu, outputs_[0].data(), threads_);
      } else {
        const float* layer_in = k == 0 ? x : outputs_[k - 1].data();
        cpu_internal::DenseLinearForward(layer_in, params_[2 * k].data(),
                                         params_[2 * k + 1].data(), B, in, out, relu,
                                         outputs_[k].data());
      }
    }
    return sparse;
  }

  void Backward(const float* x, int B, bool sparse) {
    for (int k = model_.num_linear() - 1; k >= 0; --k) {
      const int in = model_.layers[k], out = model_.layers[k + 1];
      const float* dy = output_grads_[k].data();
      cpu_internal::BiasGrad(dy, B, out, grads_[2 * k + 1].data());
      if (k == 0 && sparse) {
        cpu_internal::BuildSparseColumns(B, in, &*sparse_);
        cpu_internal::SparseWeightGrad(*sparse_, dy, in, out, grads_[0].data(), threads_);
        continue;
      }
      const float* layer_in = k == 0 ? x : outputs_[k - 1].data();
      float* dx = k > 0 ? output_grads_[k - 1].data() : nullptr;
      cpu_internal::DenseLinearBackward(layer_in, params_[2 * k].data(), dy, B, in, out,
                                        grads_[2 * k].data(), dx);
      if (dx != nullptr) {
        cpu_internal::ReluBackwardInPlace(outputs_[k - 1].data(), int64_t{B} * in, dx);
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

  void ApplyOptimizer(float lr) {
    ++optimizer_steps_;
    const size_t num_params = params_.size();
    for (size_t p = 0; p < num_params; ++p) {
      if (opt_.kind == OptimizerKind::kAdamW) {
        cpu_internal::AdamWUpdate(params_[p].data(), grads_[p].data(), opt_state_[p].data(),
                                  opt_state_[num_params + p].data(), params_[p].size(), lr,
                                  opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay,
                                  optimizer_steps_);
      } else {
        float* momentum = opt_state_.empty() ? nullptr : opt_state_[p].data();
        cpu_internal::SgdUpdate(params_[p].data(), grads_[p].data(), momentum, params_[p].size(),
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
  HostBuffer<int32_t> row_index_, row_nnz_, col_row_, col_nnz_;
  HostBuffer<float> row_value_, col_value_;
  std::optional<cpu_internal::SparseInput> sparse_;
  std::optional<tbb::task_arena> arena_;
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
  if (threads == 0) {
    threads = state.model.num_parameters() < kSmallModelParameters
                  ? 1
                  : UsableCores();
  }
  auto backend = std::make_unique<CpuBackend>(state.model, opt, options, threads);
  RETURN_IF_ERROR(backend->LoadState(state));
  return backend;
}

}  // namespace sluice
