// CpuBackend's checkpoint state: SaveState and LoadState move parameters and optimizer slots
// between the backend's buffers and a ModelState. Weights are kept input-major (W^T) for the
// step's sgemm; a ModelState holds PyTorch's [out, in] and names ("0.weight", "0.bias" and the
// optimizer's slot names), so both directions transpose, and LoadState checks every tensor's
// shape before it overwrites anything.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/cpu/internal/cpu_backend_impl.h"

namespace sluice::cpu_internal {

absl::StatusOr<ModelState> CpuBackend::SaveState() {
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

absl::Status CpuBackend::LoadState(const ModelState& state) {
  if (state.model.layers != model_.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadState: the state's layers (", absl::StrJoin(state.model.layers, ","),
                     ") differ from the backend's (", absl::StrJoin(model_.layers, ","), ")"));
  }
  if (state.params.size() != params_.size() || state.opt_state.size() != opt_state_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadState: expected ", params_.size(), " parameter tensors and ",
                     opt_state_.size(), " optimizer-state tensors (", opt_.state_slots(),
                     " slots), got ", state.params.size(), " and ", state.opt_state.size()));
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

std::string CpuBackend::ParamName(size_t p) {
  return absl::StrCat(2 * (p / 2), p % 2 == 0 ? ".weight" : ".bias");
}

// PyTorch layout of parameter p: weight [out, in], bias [out].
std::vector<int64_t> CpuBackend::TorchShape(size_t p) const {
  const int k = static_cast<int>(p / 2);
  if (p % 2 == 1) return {model_.layers[k + 1]};
  return {model_.layers[k + 1], model_.layers[k]};
}

absl::Status CpuBackend::CheckShape(const HostTensor& t, size_t p) const {
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
HostTensor CpuBackend::ToHost(std::string name, size_t p, const HostBuffer<float>& buf) const {
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

void CpuBackend::FromHost(const HostTensor& t, size_t p, HostBuffer<float>* buf) const {
  if (p % 2 == 1) {
    std::copy(t.values.begin(), t.values.end(), buf->data());
    return;
  }
  const int in = model_.layers[p / 2], out = model_.layers[p / 2 + 1];
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) buf->data()[int64_t{i} * out + o] = t.values[int64_t{o} * in + i];
  }
}

}  // namespace sluice::cpu_internal
