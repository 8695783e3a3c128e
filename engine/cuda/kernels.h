// The CUDA kernels of a training step, as host-callable launchers (the kernels themselves live
// in kernels.cu). Every launcher enqueues on `stream`, opens an NVTX range, checks its shape
// preconditions (kInvalidArgument) and cudaGetLastError() (kInternal), and never synchronizes.
// Each has a CPU reference in engine/cpu/reference_ops.h that tests/engine/cuda compares it
// with.
//
// Pointers are device pointers unless noted. Tensors are row-major, PyTorch layout.
// Thread safety: launchers are stateless; the stream orders the work.
#ifndef SLUICE_ENGINE_CUDA_KERNELS_H_
#define SLUICE_ENGINE_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "engine/model.h"
#include "pipeline/element_type.h"

namespace sluice::cuda_internal {

// Element type of a device buffer. kF32 for master weights, gradients and optimizer state;
// kBF16/kF16 for the GEMM operands in reduced-precision modes.
enum class DType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };
inline constexpr size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }

inline constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Device-resident scalars of the step, so that the step enqueues without host round trips and
// a captured CUDA Graph stays valid from step to step (lr is written by a kernel before each
// launch, not baked into the graph).
struct StepScalars {
  float lr;
  float loss_scale;  // 1 except in fp16 mode (dynamic loss scaling)
  int found_inf;     // set by CheckFinite, cleared by FinishStep
  int bad_label;     // sticky: a label outside [0, C) was seen; TakeLoss reports it
  int good_steps;    // fp16: consecutive finite steps since the last scale change
  int pad;
  long long optimizer_steps;  // completed updates (Adam bias correction, SGD first step)
  long long skipped_steps;    // fp16: steps skipped because of inf/nan gradients
  double train_loss_sum;
  unsigned long long train_correct;
  double eval_loss_sum;
  unsigned long long eval_correct;
};

// Channels whose normalization LaunchConvertInput applies on the device (a kernel argument).
inline constexpr int kMaxConvertChannels = 128;

// Per-channel normalization of [B, C, H, W] u8 input, passed to the kernel by value: element i
// is of channel (i / plane) % channels. Built from a batch's Normalization by
// DeviceNormalization (engine/cuda/internal/cuda_backend_impl.h).
struct ChannelAffine {
  int64_t plane = 1;  // H * W
  int channels = 1;   // C, or 1 when every channel has the same mean and std
  float mean[kMaxConvertChannels] = {0.0f};
  float std[kMaxConvertChannels] = {1.0f};
};

// out[i] = convert(in[i]) over n values. u8 input is normalized per channel:
// (in/255 - mean[c]) / std[c], c as ChannelAffine says (ref::NormalizeU8 per channel plane).
// f16/f32 input (already normalized on the CPU) is only converted.
absl::Status LaunchConvertInput(const void* in, ElementType in_format, int64_t n,
                                const ChannelAffine& norm, void* out, DType out_type,
                                cudaStream_t stream, int block_size = 256);

// out[i] = convert(in[i]), f32 -> out_type.
absl::Status LaunchCast(const float* in, int64_t n, void* out, DType out_type, cudaStream_t stream,
                        int block_size = 256);

// y[b,o] = y[b,o] + bias[o], then max(., 0) when `relu`, in place. Used when the cuBLASLt
// bias/ReLU epilogue is unavailable.
absl::Status LaunchBiasRelu(float* y, const float* bias, int B, int O, bool relu,
                            cudaStream_t stream, int block_size = 256);

// dx[i] = y[i] > 0 ? dx[i] : 0, in place (ref::ReluBackwardInPlace).
absl::Status LaunchReluBackward(const float* y, int64_t n, float* dx, cudaStream_t stream,
                                int block_size = 256);

// Fused softmax cross-entropy forward+backward (ref::SoftmaxCrossEntropy), one warp per row:
//   dlogits[b,c] = (softmax(logits[b])[c] - [c == label[b]]) * scale / D, where scale is
//   *loss_scale (1 when loss_scale is null) and D is `divisor` (0: B; a data-parallel rank
//   passes the global batch's size); skipped when dlogits is null (evaluation).
//   *loss_sum += sum of -log softmax[label]; *correct += argmax hits (first max wins);
//   *bad_label = 1 if a label is outside [0, C) (that row contributes nothing).
// Accumulates on the device with atomics; no host synchronization.
absl::Status LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, int B, int C,
                                       const float* loss_scale, float* dlogits, double* loss_sum,
                                       unsigned long long* correct, int* bad_label,
                                       cudaStream_t stream, int divisor = 0);

// db[o] = sum over b of dy[b,o] (the bias gradient of a Linear), deterministic.
absl::Status LaunchBiasGrad(const float* dy, int B, int O, float* db, cudaStream_t stream);

// *found_inf = 1 if any of x[0, n) is inf or nan (fp16 loss scaling).
absl::Status LaunchCheckFinite(const float* x, int64_t n, int* found_inf, cudaStream_t stream,
                               int block_size = 256);

// One optimizer update over ALL parameters in one launch (they are one flat buffer).
// Semantics: ref::SgdStep / ref::AdamWStep, with the gradient first multiplied by
// 1/scalars->loss_scale; the whole update is skipped when scalars->found_inf is set.
// lr and the step count are read from `scalars` (device), so a captured graph is reusable.
// When params_lp is non-null the updated weights are also written there in lp_type (the
// reduced-precision copy the GEMMs read).
struct OptimizerStepArgs {
  float* params = nullptr;
  const float* grads = nullptr;
  float* slot0 = nullptr;  // momentum buffer (SGD with momentum) or Adam m
  float* slot1 = nullptr;  // Adam v
  void* params_lp = nullptr;
  DType lp_type = DType::kF32;
  int64_t n = 0;
  OptimizerConfig config;
  const StepScalars* scalars = nullptr;
};
absl::Status LaunchOptimizerStep(const OptimizerStepArgs& args, cudaStream_t stream,
                                 int block_size = 256);

// scalars->lr = lr (a 1-thread kernel: the value travels as a launch argument, so there is no
// host buffer to race with, and a graph launched afterwards sees it).
absl::Status LaunchSetLr(StepScalars* scalars, float lr, cudaStream_t stream);

// After the optimizer: counts the step (or the skip), adjusts the fp16 loss scale when
// `dynamic_loss_scale` (halve on inf/nan, double after 2000 finite steps), clears found_inf.
absl::Status LaunchFinishStep(StepScalars* scalars, bool dynamic_loss_scale, cudaStream_t stream);

}  // namespace sluice::cuda_internal

#endif  // SLUICE_ENGINE_CUDA_KERNELS_H_
