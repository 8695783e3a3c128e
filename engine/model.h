// Model and optimizer configuration shared by every backend, and the host-side model state
// used for initialization, checkpoints and export.
#ifndef SLUICE_ENGINE_MODEL_H_
#define SLUICE_ENGINE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

// An MLP: Linear(layers[0], layers[1]), ReLU, Linear(layers[1], layers[2]), ... with no ReLU
// after the last Linear; softmax cross-entropy loss over layers.back() classes.
struct ModelConfig {
  std::vector<int> layers = {784, 128, 10};
  int num_linear() const { return static_cast<int>(layers.size()) - 1; }
  int64_t num_parameters() const;
};
// The largest layer size: the largest a checkpoint may hold (engine/checkpoint.cc).
inline constexpr uint64_t kMaxLayerSize = uint64_t{1} << 30;

// Parses "784,128,10"; at least two sizes, each in [1, kMaxLayerSize]. kInvalidArgument naming
// the size: "'x' in '784,x' is not a positive integer", "'99999999999' in '...' is above the
// maximum layer size 1073741824".
absl::StatusOr<ModelConfig> ParseLayers(absl::string_view text);

enum class OptimizerKind { kSgd, kAdamW };
enum class LrSchedule { kConstant, kStep, kCosine };
// "sgd" | "adamw"; else InvalidArgument "expected sgd or adamw, got \"<name>\"".
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);
// "constant" | "step" | "cosine"; else InvalidArgument "expected constant, step or cosine, got
// \"<name>\"".
absl::StatusOr<LrSchedule> ParseLrSchedule(absl::string_view name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.01f;
  float momentum = 0.0f;
  bool nesterov = false;
  float weight_decay = 0.0f;  // SGD: L2 added to the gradient (as torch.optim.SGD);
                              // AdamW: decoupled decay (as torch.optim.AdamW)
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  LrSchedule schedule = LrSchedule::kConstant;
  int64_t step_size = 0;  // kStep: multiply by gamma every step_size steps
  float gamma = 0.1f;
  int64_t warmup_steps = 0;  // kCosine: linear warmup, then cosine to 0 at total_steps
  int64_t total_steps = 0;
  // Number of optimizer-state tensors per parameter tensor: 0 (plain SGD), 1 (momentum), 2 (Adam).
  int state_slots() const;
};
// Learning rate for optimizer step `step` (0-based) under the schedule.
float LearningRateAt(const OptimizerConfig& config, int64_t step);

// One named host tensor, fp32, row-major.
struct HostTensor {
  std::string name;  // e.g. "0.weight", "0.bias", "2.weight" (PyTorch nn.Sequential names)
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// Everything that defines a model's training state, on the host.
// params[2k] is Linear k's weight [out, in] (PyTorch layout), params[2k+1] its bias [out].
// opt_state[s * params.size() + p] is state slot s (momentum buffer; Adam m, then v) of param p.
struct ModelState {
  ModelConfig model;
  std::vector<HostTensor> params;
  std::vector<HostTensor> opt_state;
  int64_t optimizer_steps = 0;  // Adam bias correction needs it
};

// PyTorch nn.Linear's default init in distribution: weights and biases uniform in
// [-1/sqrt(fan_in), 1/sqrt(fan_in)], drawn from a generator seeded with `seed`.
// Deterministic for a given (config, seed). Optimizer state is zero-filled per `opt`.
ModelState InitModelState(const ModelConfig& config, const OptimizerConfig& opt, uint64_t seed);

}  // namespace sluice

#endif  // SLUICE_ENGINE_MODEL_H_
