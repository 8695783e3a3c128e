// How CudaBackend runs a step, once TrainStep (cuda_backend.cc) has checked the batch: Stage
// waits for the batch's ready event and copies it into the staging buffers when it must;
// EnqueueTrainBody enqueues forward, backward, exchange and optimizer; RunGraphed runs the
// first step of each (batch size, format) eagerly and captures the second as a CUDA Graph that
// later steps launch. Also the host's reads of the device's step scalars: TakeLoss, Evaluate
// and Synchronize.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/internal/cuda_backend_impl.h"

namespace sluice::cuda_internal {

absl::StatusOr<ChannelAffine> DeviceNormalization(const Normalization* normalization,
                                                  const SampleSpec& sample) {
  ChannelAffine out;
  out.plane = static_cast<int64_t>(std::max<size_t>(1, sample.plane_values()));
  if (normalization == nullptr || normalization->is_identity()) return out;
  RETURN_IF_ERROR(CheckNormalization(*normalization, sample.channels));
  const bool shared = normalization->mean.size() == 1 && normalization->std.size() == 1;
  if (!shared && sample.channels > static_cast<uint32_t>(kMaxConvertChannels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("per-channel normalization on the device takes at most ", kMaxConvertChannels,
                     " channels; the samples have ", sample.channels, " (use --h2d-format f32)"));
  }
  out.channels = shared ? 1 : static_cast<int>(sample.channels);
  for (int c = 0; c < out.channels; ++c) {
    out.mean[c] = normalization->mean_of(c);
    out.std[c] = normalization->std_of(c);
  }
  return out;
}

absl::StatusOr<CudaBackend::Input> CudaBackend::Stage(const BatchView& b, bool force_staging) {
  NvtxRange range("StageBatch");
  if (b.ready_event != nullptr) {
    RETURN_IF_ERROR(compute_stream_->Wait(b.ready_event));
  }
  ASSIGN_OR_RETURN(const ChannelAffine norm, DeviceNormalization(b.normalization, b.sample));
  Input in{b.samples, b.labels, b.sample.dtype, static_cast<int>(b.size), norm};
  if (b.on_device && !force_staging) return in;
  // Host batches (pageable or pinned): cudaMemcpyAsync returns once the source has been read
  // or staged by the driver, so the caller may reuse its buffer when TrainStep returns.
  const cudaMemcpyKind kind = b.on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  const size_t bytes = size_t{b.size} * b.sample.bytes();
  cudaCheck(cudaMemcpyAsync(staging_samples_, b.samples, bytes, kind, stream_));
  cudaCheck(cudaMemcpyAsync(staging_labels_, b.labels, sizeof(int32_t) * b.size, kind, stream_));
  in.samples = staging_samples_;
  in.labels = staging_labels_;
  return in;
}

absl::Status CudaBackend::EnqueueTrainBody(const Input& in) {
  if (in.B == 0) {  // this rank's share is empty: zero gradients join the exchange
    cudaCheck(cudaMemsetAsync(grads_, 0, sizeof(float) * num_params_, stream_));
    for (int l = L() - 1; l >= 0; --l) RETURN_IF_ERROR(ExchangeLayer(l));
  } else {
    RETURN_IF_ERROR(EnqueueForward(in, /*train=*/true));
    RETURN_IF_ERROR(EnqueueBackward(in));
  }
  {
    NvtxRange range("ExchangeGradients");
    RETURN_IF_ERROR(ExchangeGradients());
  }
  return EnqueueOptimizer();
}

absl::Status CudaBackend::RunGraphed(const Input& in) {
  if (std::memcmp(&in.norm, &graph_norm_, sizeof(ChannelAffine)) != 0) {
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
    eager_runs_.clear();
    graph_norm_ = in.norm;
  }
  const GraphKey key{in.B, static_cast<int>(in.format)};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // The first step of each shape runs eagerly: it creates the cuBLASLt plans and loads the
    // kernels outside of capture. The second one is captured.
    if (eager_runs_[key]++ == 0) return EnqueueTrainBody(in);
    NvtxRange range("CaptureStepGraph");
    cudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    absl::Status body = EnqueueTrainBody(in);
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (!body.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      ClearLastCudaError();
      return body;
    }
    cudaCheck(end);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    cudaCheck(inst);
    it = graphs_.emplace(key, exec).first;
  }
  NvtxRange range("LaunchStepGraph");
  cudaCheck(cudaGraphLaunch(it->second, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::ReadScalars() {
  cudaCheck(cudaMemcpyAsync(host_scalars_, scalars_, sizeof(StepScalars), cudaMemcpyDeviceToHost,
                            stream_));
  return WaitStream(stream_);
}

absl::StatusOr<LossStats> CudaBackend::TakeLoss() {
  cudaCheck(cudaSetDevice(device_));
  RETURN_IF_ERROR(ReadScalars());
  LossStats out;
  out.samples = pending_samples_;
  out.correct = static_cast<int64_t>(host_scalars_->train_correct);
  out.mean_loss = pending_samples_ ? host_scalars_->train_loss_sum / pending_samples_ : 0.0;
  const bool bad_label = host_scalars_->bad_label != 0;
  pending_samples_ = 0;
  cudaCheck(cudaMemsetAsync(&scalars_->train_loss_sum, 0, sizeof(double), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->train_correct, 0, sizeof(unsigned long long), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->bad_label, 0, sizeof(int), stream_));
  if (bad_label) {
    return absl::InvalidArgumentError(absl::StrCat("a training label was outside [0, ", width(L()),
                                                   "); those samples were ignored"));
  }
  return out;
}

absl::Status CudaBackend::Evaluate(const BatchView& batch, EvalStats* stats) {
  NvtxRange range("Evaluate");
  RETURN_IF_ERROR(CheckBatch(batch));
  if (batch.size == 0) return absl::OkStatus();  // a rank's empty share of the test split
  cudaCheck(cudaSetDevice(device_));
  ASSIGN_OR_RETURN(Input in, Stage(batch, /*force_staging=*/false));
  RETURN_IF_ERROR(EnqueueForward(in, /*train=*/false));
  RETURN_IF_ERROR(ReadScalars());
  const bool bad_label = host_scalars_->bad_label != 0;
  stats->loss_sum += host_scalars_->eval_loss_sum;
  stats->correct += static_cast<int64_t>(host_scalars_->eval_correct);
  stats->samples += in.B;
  cudaCheck(cudaMemsetAsync(&scalars_->eval_loss_sum, 0, sizeof(double), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->eval_correct, 0, sizeof(unsigned long long), stream_));
  cudaCheck(cudaMemsetAsync(&scalars_->bad_label, 0, sizeof(int), stream_));
  if (bad_label) {
    return absl::InvalidArgumentError(
        absl::StrCat("an evaluation label was outside [0, ", width(L()), ")"));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  cudaCheck(cudaSetDevice(device_));
  return WaitStream(stream_);
}

}  // namespace sluice::cuda_internal
