// The CPU backend: the "device" is host memory, matrix products are OpenBLAS sgemm, and the
// first layer skips the zero pixels of the input with AVX-512 sparse kernels when the batch is
// sparse enough (see internal/cpu_kernels.h for why that pays).
//
// This file holds CpuBackend's construction (the buffers it allocates and the threads it runs
// on, from the BackendOptions), what it checks of each batch and how it converts the input,
// the gradient exchange of data-parallel runs, and CreateCpuBackend. The class and the step's
// threads are described in internal/cpu_backend_impl.h; the step itself is in
// internal/cpu_backend_step.cc, the checkpoint state in internal/cpu_backend_state.cc.
#include "engine/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "engine/cpu/internal/cpu_backend_impl.h"
#include "engine/cpu/internal/cpu_kernels.h"

namespace sluice {
namespace cpu_internal {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuBackend::CpuBackend(const ModelConfig& model, const OptimizerConfig& opt,
                       const BackendOptions& options, int threads, bool fused_sgd)
    : model_(model),
      opt_(opt),
      options_(options),
      threads_(threads),
      fused_sgd_(fused_sgd && opt.kind == OptimizerKind::kSgd && opt.momentum == 0.0f &&
                 opt.weight_decay == 0.0f) {
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
          sl.col_value.data(), sl.col_nnz.data(),   slice_rows,        in0};
    }
  }
  // Each slice and item calls sgemm on its own thread: OpenBLAS must not start threads of
  // its own.
  openblas_set_num_threads(1);
  if (threads_ > 1) team_.emplace(threads_);
  PlanWeightItems();
}

std::string CpuBackend::name() const {
  return absl::StrCat("cpu (OpenBLAS sgemm",
                      cpu_internal::SparseKernelsAvailable() ? ", AVX-512 sparse input" : "", ", ",
                      threads_, threads_ == 1 ? " thread)" : " threads, batch split)");
}

absl::Status CpuBackend::CheckBatch(const BatchView& batch) const {
  if (batch.on_device) {
    return absl::InvalidArgumentError("the CPU backend got a device batch (on_device = true)");
  }
  if (batch.sample.values() != static_cast<size_t>(model_.layers[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch samples are ", SampleSpecString(batch.sample), " (",
                     batch.sample.values(), " values); the model takes ", model_.layers[0]));
  }
  if (batch.sample.dtype == ElementType::kBF16) {
    return absl::InvalidArgumentError("the CPU backend takes u8, f16 or f32 batches, not bf16");
  }
  if (batch.normalization != nullptr) {
    RETURN_IF_ERROR(CheckNormalization(*batch.normalization, batch.sample.channels));
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
      return absl::InvalidArgumentError(
          absl::StrCat("label ", batch.labels[b], " of sample ", b, " in batch (epoch ",
                       batch.epoch, ", step ", batch.step, ") is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

// The slice's rows of the batch as f32 (u8 and f16 are converted into its rows of input_).
const float* CpuBackend::PrepareInput(const BatchView& batch, const Slice& sl) {
  const int64_t values = static_cast<int64_t>(batch.sample.values());
  const int64_t first = int64_t{sl.begin} * values;
  const int64_t n = int64_t{sl.rows} * values;
  switch (batch.sample.dtype) {
    case H2DFormat::kU8: {
      const uint8_t* in = static_cast<const uint8_t*>(batch.samples);
      const Normalization* norm = batch.normalization;
      if (norm == nullptr || (norm->mean.size() == 1 && norm->std.size() == 1)) {
        cpu_internal::NormalizeU8(in + first, n, norm ? norm->mean[0] : 0.0f,
                                  norm ? norm->std[0] : 1.0f, input_.data() + first);
        return input_.data() + first;
      }
      // [B, C, H, W]: each channel's plane is contiguous, so one kernel call per plane.
      const int64_t plane = static_cast<int64_t>(batch.sample.plane_values());
      for (int64_t p = first; p < first + n; p += plane) {
        const size_t c = static_cast<size_t>((p / plane) % batch.sample.channels);
        cpu_internal::NormalizeU8(in + p, plane, norm->mean_of(c), norm->std_of(c),
                                  input_.data() + p);
      }
      return input_.data() + first;
    }
    case H2DFormat::kF16:
      cpu_internal::HalfToFloat(static_cast<const uint16_t*>(batch.samples) + first, n,
                                input_.data() + first);
      return input_.data() + first;
    case H2DFormat::kF32:
    case H2DFormat::kBF16:  // not an h2d format: the pipeline never makes such batches
      break;
  }
  return static_cast<const float*>(batch.samples) + first;  // normalized by the pipeline
}

bool CpuBackend::distributed() const {
  return options_.gradient_comm != nullptr &&
         (options_.gradient_comm->is_distributed() || options_.exchange_in_world_of_one);
}

// The samples of the whole global batch: this batch's in a single process, else the sum of
// every rank's share (a rank may have skipped corrupt frames, so the plan's global_size is
// not enough for an exact mean).
absl::StatusOr<int64_t> CpuBackend::GlobalSamples(const BatchView& batch) {
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
absl::Status CpuBackend::ExchangeGradients() {
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

}  // namespace cpu_internal

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
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch must be >= 1, got ", options.max_batch));
  }
  if (state.model.layers.size() < 2) {
    return absl::InvalidArgumentError("the model needs at least two layer sizes");
  }
  int threads = cpu.threads;
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be >= 0, got ", threads));
  }
  if (threads == 0) threads = UsableCores();
  RETURN_IF_ERROR(CheckThreadsCanStart(threads - 1, "the CPU backend's compute threads"));
  auto backend =
      std::make_unique<cpu_internal::CpuBackend>(state.model, opt, options, threads, cpu.fused_sgd);
  RETURN_IF_ERROR(backend->LoadState(state));
  return backend;
}

// Mirrors CpuBackend's constructor, buffer for buffer (tests/engine/cpu_backend_test.cc checks
// it against the ledger).
uint64_t CpuBackendAllocationBytes(const ModelConfig& model, const OptimizerConfig& opt,
                                   int max_batch, int threads) {
  if (model.layers.size() < 2 || max_batch < 1) return 0;
  if (threads <= 0) threads = UsableCores();
  using U = absl::uint128;
  // Every buffer holds 4-byte values (float, int32); HostBuffer::bytes() counts no padding.
  const U batch = U(static_cast<uint64_t>(max_batch));
  const U n_threads = U(static_cast<uint64_t>(threads));
  U params = 0;
  U values = 0;
  for (size_t k = 0; k + 1 < model.layers.size(); ++k) {
    const U in = U(static_cast<uint64_t>(model.layers[k]));
    const U out = U(static_cast<uint64_t>(model.layers[k + 1]));
    params += in * out + out;
    values += U(2) * batch * out;  // outputs and their gradients
  }
  values += params * U(2 + static_cast<uint64_t>(opt.state_slots()));  // + gradients + state
  const U in0 = U(static_cast<uint64_t>(model.layers[0]));
  const U n1 = U(static_cast<uint64_t>(model.layers[1]));
  values += batch * in0;  // the input batch
  if (cpu_internal::SparseKernelsAvailable()) {
    const U rows = (batch + n_threads - 1) / n_threads;
    const U cells = rows * in0;
    values += (n_threads - 1) * in0 * n1;                                     // dw0 past slice 0
    values += n_threads * (U(2) * (cells + 16) + rows + U(2) * cells + in0);  // sparse lists
  }
  const U bytes = values * 4;
  return bytes > U(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(bytes);
}

}  // namespace sluice
