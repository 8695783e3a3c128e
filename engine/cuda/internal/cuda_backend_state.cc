// CudaBackend's checkpoint state: SaveState copies the flat device buffers of parameters and
// optimizer slots out into a ModelState's tensors (with the step count from the device's
// scalars); LoadState checks every tensor's shape and size against the layout, then copies
// them in with nothing in flight and refreshes the reduced-precision weight copy.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/internal/cuda_backend_impl.h"

namespace sluice::cuda_internal {

absl::Status CudaBackend::RefreshLowPrecisionWeights() {
  if (!low_precision()) return absl::OkStatus();
  return LaunchCast(params_, num_params_, params_lp_, lp_, stream_);
}

absl::StatusOr<ModelState> CudaBackend::SaveState() {
  cudaCheck(cudaSetDevice(device_));
  RETURN_IF_ERROR(ReadScalars());
  ModelState out = layout_;
  out.optimizer_steps = host_scalars_->optimizer_steps;
  for (size_t i = 0; i < out.params.size(); ++i) {
    HostTensor& t = out.params[i];
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.values.resize(n);
    cudaCheck(cudaMemcpyAsync(t.values.data(), params_ + offsets_[i], n * sizeof(float),
                              cudaMemcpyDeviceToHost, stream_));
  }
  const size_t np = out.params.size();
  for (size_t j = 0; j < out.opt_state.size(); ++j) {
    const size_t slot = j / np, p = j % np;
    HostTensor& t = out.opt_state[j];
    t.values.resize(out.params[p].values.size());
    cudaCheck(cudaMemcpyAsync(t.values.data(), slots_ + slot * num_params_ + offsets_[p],
                              t.values.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  }
  cudaCheck(cudaStreamSynchronize(stream_));  // the host reads `out` on return
  return out;
}

absl::Status CudaBackend::LoadState(const ModelState& state) {
  if (state.model.layers != layout_.model.layers) {
    return absl::InvalidArgumentError("LoadState: the state's layers differ from the model's");
  }
  if (state.params.size() != layout_.params.size() ||
      state.opt_state.size() != layout_.opt_state.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoadState: expected ", layout_.params.size(), " parameter and ", layout_.opt_state.size(),
        " optimizer-state tensors, got ", state.params.size(), " and ", state.opt_state.size()));
  }
  const size_t np = layout_.params.size();
  auto expected = [&](size_t p) {
    return p + 1 < np ? offsets_[p + 1] - offsets_[p] : num_params_ - offsets_[p];
  };
  for (size_t i = 0; i < np; ++i) {
    if (state.params[i].shape != layout_.params[i].shape ||
        static_cast<int64_t>(state.params[i].values.size()) != expected(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoadState: tensor ", state.params[i].name, " has the wrong shape"));
    }
  }
  for (size_t j = 0; j < state.opt_state.size(); ++j) {
    if (static_cast<int64_t>(state.opt_state[j].values.size()) != expected(j % np)) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoadState: tensor ", state.opt_state[j].name, " has the wrong size"));
    }
  }
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaStreamSynchronize(stream_));  // nothing in flight may read what we overwrite
  // Every copy on the compute stream, which then casts the weights: a legacy-stream cudaMemcpy
  // from pageable memory may return before its DMA lands, and is not ordered before this
  // non-blocking stream. The sources stay valid until the synchronize below.
  for (size_t i = 0; i < np; ++i) {
    cudaCheck(cudaMemcpyAsync(params_ + offsets_[i], state.params[i].values.data(),
                              expected(i) * sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
  for (size_t j = 0; j < state.opt_state.size(); ++j) {
    cudaCheck(cudaMemcpyAsync(slots_ + (j / np) * num_params_ + offsets_[j % np],
                              state.opt_state[j].values.data(), expected(j % np) * sizeof(float),
                              cudaMemcpyHostToDevice, stream_));
  }
  const long long steps = state.optimizer_steps;
  cudaCheck(cudaMemcpyAsync(&scalars_->optimizer_steps, &steps, sizeof(steps),
                            cudaMemcpyHostToDevice, stream_));
  RETURN_IF_ERROR(RefreshLowPrecisionWeights());
  cudaCheck(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace sluice::cuda_internal
