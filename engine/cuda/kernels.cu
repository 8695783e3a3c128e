// Kernels of the training step. Layout follows llm.c: the CUDA kernels first, then the
// launchers, each of which opens an NVTX range, checks its preconditions, sizes its grid with
// CeilDiv and checks cudaGetLastError(). References: engine/cpu/reference_ops.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cfloat>
#include <cmath>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/kernels.h"

namespace sluice::cuda_internal {
namespace {

// Closes the NVTX range when the launcher returns, on every path.
struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// ----------------------------------------------------------------------------
// CUDA kernels

// Grid-stride: one thread per element. u8 input is normalized exactly as ref::NormalizeU8 with
// its channel's mean and std (same operation order, so fp32 results match bit for bit).
template <typename In, typename Out, bool kNormalize>
__global__ void ConvertKernel(const In* __restrict__ in, int64_t n, ChannelAffine norm,
                              Out* __restrict__ out) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = ToFloat(in[i]);
    if (kNormalize) {
      const int c = static_cast<int>((i / norm.plane) % norm.channels);
      v = (v / 255.0f - norm.mean[c]) / norm.std[c];
    }
    out[i] = FromFloat<Out>(v);
  }
}

__global__ void BiasReluKernel(float* __restrict__ y, const float* __restrict__ bias, int B, int O,
                               bool relu) {
  int64_t n = (int64_t)B * O;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = y[i] + bias[i % O];
    y[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void ReluBackwardKernel(const float* __restrict__ y, int64_t n, float* __restrict__ dx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    if (!(y[i] > 0.0f)) dx[i] = 0.0f;
  }
}

// One warp per row of logits. C is small (10 for MNIST) so each lane holds at most a few
// logits; the reductions (max with first-index tie break, sum of exp) are warp shuffles.
__global__ void SoftmaxCrossEntropyKernel(const float* __restrict__ logits,
                                          const int32_t* __restrict__ labels, int B, int C,
                                          const float* __restrict__ loss_scale,
                                          float* __restrict__ dlogits, double* loss_sum,
                                          unsigned long long* correct, int* bad_label,
                                          int divisor) {
  const int lane = threadIdx.x % 32;
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  if (row >= B) return;  // whole warps exit together: row is uniform within a warp
  const float* x = logits + (int64_t)row * C;
  const int label = labels[row];
  const bool label_ok = label >= 0 && label < C;

  float max_v = -INFINITY;
  int max_i = C;
  for (int c = lane; c < C; c += 32) {
    float v = x[c];
    if (v > max_v) {
      max_v = v;
      max_i = c;
    }  // lanes visit ascending c: first max kept
  }
  for (int off = 16; off > 0; off /= 2) {
    float ov = __shfl_xor_sync(0xffffffffu, max_v, off);
    int oi = __shfl_xor_sync(0xffffffffu, max_i, off);
    if (ov > max_v || (ov == max_v && oi < max_i)) {
      max_v = ov;
      max_i = oi;
    }
  }
  float sum = 0.0f;
  for (int c = lane; c < C; c += 32) sum += expf(x[c] - max_v);
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);

  if (dlogits != nullptr) {
    const float scale = (loss_scale ? *loss_scale : 1.0f) / divisor;
    float* d = dlogits + (int64_t)row * C;
    for (int c = lane; c < C; c += 32) {
      float p = expf(x[c] - max_v) / sum;
      d[c] = label_ok ? (p - (c == label ? 1.0f : 0.0f)) * scale : 0.0f;
    }
  }
  if (lane == 0) {
    if (!label_ok) {
      atomicExch(bad_label, 1);
      return;
    }
    float loss = logf(sum) + max_v - x[label];  // -log softmax[label]
    atomicAdd(loss_sum, (double)loss);
    if (max_i == label) atomicAdd(correct, 1ull);
  }
}

// Block (32, 8): threadIdx.x picks the column, the 8 rows of threads stride over the batch,
// then a shared-memory reduction over threadIdx.y. Fixed order: deterministic.
__global__ void BiasGradKernel(const float* __restrict__ dy, int B, int O, float* __restrict__ db) {
  __shared__ float partial[8][33];
  const int o = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (o < O) {
    for (int b = threadIdx.y; b < B; b += 8) acc += dy[(int64_t)b * O + o];
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < O) {
    float s = 0.0f;
    for (int j = 0; j < 8; ++j) s += partial[j][threadIdx.x];
    db[o] = s;
  }
}

__global__ void CheckFiniteKernel(const float* __restrict__ x, int64_t n, int* found_inf) {
  bool bad = false;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    bad |= !isfinite(x[i]);
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicExch(found_inf, 1);
}

struct OptimizerParams {
  int kind;  // 0 SGD, 1 AdamW
  float momentum, weight_decay, beta1, beta2, eps;
  bool nesterov;
};

// All parameters are one flat buffer, so one launch updates every tensor. lr, the loss scale
// and the step count come from device memory (graph-safe).
template <typename Lp>
__global__ void OptimizerKernel(float* __restrict__ p, const float* __restrict__ grad,
                                float* __restrict__ s0, float* __restrict__ s1,
                                Lp* __restrict__ p_lp, int64_t n, OptimizerParams o,
                                const StepScalars* __restrict__ scalars) {
  if (scalars->found_inf) return;  // fp16 overflow: skip the step (FinishStep halves the scale)
  const float lr = scalars->lr;
  const float inv_scale = 1.0f / scalars->loss_scale;
  const long long step = scalars->optimizer_steps + 1;  // 1-based, after this update
  float bc1 = 1.0f, bc2 = 1.0f;
  if (o.kind == 1) {
    bc1 = 1.0f - powf(o.beta1, (float)step);
    bc2 = 1.0f - powf(o.beta2, (float)step);
  }
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float g = grad[i] * inv_scale;
    float w = p[i];
    if (o.kind == 0) {
      g += o.weight_decay * w;
      if (o.momentum != 0.0f) {
        float buf = step == 1 ? g : o.momentum * s0[i] + g;
        s0[i] = buf;
        g = o.nesterov ? g + o.momentum * buf : buf;
      }
      w -= lr * g;
    } else {
      w *= 1.0f - lr * o.weight_decay;
      float m = o.beta1 * s0[i] + (1.0f - o.beta1) * g;
      float v = o.beta2 * s1[i] + (1.0f - o.beta2) * g * g;
      s0[i] = m;
      s1[i] = v;
      w -= lr * (m / bc1) / (sqrtf(v / bc2) + o.eps);
    }
    p[i] = w;
    if (p_lp != nullptr) p_lp[i] = FromFloat<Lp>(w);
  }
}

__global__ void SetLrKernel(StepScalars* s, float lr) { s->lr = lr; }

__global__ void FinishStepKernel(StepScalars* s, bool dynamic) {
  if (s->found_inf) {
    s->skipped_steps += 1;
    if (dynamic) s->loss_scale = fmaxf(s->loss_scale * 0.5f, 1.0f);
    s->good_steps = 0;
  } else {
    s->optimizer_steps += 1;
    if (dynamic && ++s->good_steps >= 2000) {
      s->loss_scale = fminf(s->loss_scale * 2.0f, 65536.0f);
      s->good_steps = 0;
    }
  }
  s->found_inf = 0;
}

// Grid for a grid-stride loop: enough blocks to cover n, capped (H200: 132 SMs, so 132 * 16
// resident blocks of 256 threads is plenty).
int GridFor(int64_t n, int block_size) {
  int64_t blocks = CeilDiv(n, block_size);
  return static_cast<int>(blocks < 132 * 16 ? (blocks > 0 ? blocks : 1) : 132 * 16);
}

template <typename In>
absl::Status ConvertFrom(const In* in, bool normalize, int64_t n, const ChannelAffine& norm,
                         void* out, DType out_type, cudaStream_t stream, int block_size) {
  const int grid = GridFor(n, block_size);
#define SLUICE_CONVERT_(Out)                                                    \
  if (normalize)                                                                \
    ConvertKernel<In, Out, true>                                                \
        <<<grid, block_size, 0, stream>>>(in, n, norm, static_cast<Out*>(out)); \
  else                                                                          \
    ConvertKernel<In, Out, false>                                               \
        <<<grid, block_size, 0, stream>>>(in, n, norm, static_cast<Out*>(out));
  switch (out_type) {
    case DType::kF32:
      SLUICE_CONVERT_(float);
      break;
    case DType::kBF16:
      SLUICE_CONVERT_(__nv_bfloat16);
      break;
    case DType::kF16:
      SLUICE_CONVERT_(__half);
      break;
  }
#undef SLUICE_CONVERT_
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

// ----------------------------------------------------------------------------
// kernel launchers

absl::Status LaunchConvertInput(const void* in, ElementType in_format, int64_t n,
                                const ChannelAffine& norm, void* out, DType out_type,
                                cudaStream_t stream, int block_size) {
  NvtxRange range("ConvertInput");
  SLUICE_CUDA_EXPECT(in != nullptr && out != nullptr && n >= 0);
  SLUICE_CUDA_EXPECT(block_size > 0 && block_size <= 1024 && block_size % 32 == 0);
  SLUICE_CUDA_EXPECT(norm.plane >= 1 && norm.channels >= 1 && norm.channels <= kMaxConvertChannels);
  for (int c = 0; c < norm.channels; ++c) SLUICE_CUDA_EXPECT(norm.std[c] != 0.0f);
  if (n == 0) return absl::OkStatus();
  switch (in_format) {
    case ElementType::kU8:
      return ConvertFrom(static_cast<const uint8_t*>(in), true, n, norm, out, out_type, stream,
                         block_size);
    case ElementType::kF16:
      return ConvertFrom(static_cast<const __half*>(in), false, n, norm, out, out_type, stream,
                         block_size);
    case ElementType::kF32:
      return ConvertFrom(static_cast<const float*>(in), false, n, norm, out, out_type, stream,
                         block_size);
    case ElementType::kBF16:
      break;
  }
  return absl::InvalidArgumentError("LaunchConvertInput: unknown input format");
}

absl::Status LaunchCast(const float* in, int64_t n, void* out, DType out_type, cudaStream_t stream,
                        int block_size) {
  NvtxRange range("Cast");
  SLUICE_CUDA_EXPECT(in != nullptr && out != nullptr && n >= 0);
  SLUICE_CUDA_EXPECT(block_size > 0 && block_size <= 1024 && block_size % 32 == 0);
  if (n == 0) return absl::OkStatus();
  return ConvertFrom(in, false, n, ChannelAffine{}, out, out_type, stream, block_size);
}

absl::Status LaunchBiasRelu(float* y, const float* bias, int B, int O, bool relu,
                            cudaStream_t stream, int block_size) {
  NvtxRange range("BiasRelu");
  SLUICE_CUDA_EXPECT(y != nullptr && bias != nullptr && B >= 0 && O > 0);
  SLUICE_CUDA_EXPECT(block_size > 0 && block_size <= 1024 && block_size % 32 == 0);
  const int64_t n = (int64_t)B * O;
  if (n == 0) return absl::OkStatus();
  BiasReluKernel<<<GridFor(n, block_size), block_size, 0, stream>>>(y, bias, B, O, relu);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchReluBackward(const float* y, int64_t n, float* dx, cudaStream_t stream,
                                int block_size) {
  NvtxRange range("ReluBackward");
  SLUICE_CUDA_EXPECT(y != nullptr && dx != nullptr && n >= 0);
  SLUICE_CUDA_EXPECT(block_size > 0 && block_size <= 1024 && block_size % 32 == 0);
  if (n == 0) return absl::OkStatus();
  ReluBackwardKernel<<<GridFor(n, block_size), block_size, 0, stream>>>(y, n, dx);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, int B, int C,
                                       const float* loss_scale, float* dlogits, double* loss_sum,
                                       unsigned long long* correct, int* bad_label,
                                       cudaStream_t stream, int divisor) {
  NvtxRange range("SoftmaxCrossEntropy");
  SLUICE_CUDA_EXPECT(logits != nullptr && labels != nullptr && B >= 0 && C > 0);
  SLUICE_CUDA_EXPECT(loss_sum != nullptr && correct != nullptr && bad_label != nullptr);
  if (B == 0) return absl::OkStatus();
  constexpr int kBlock = 128;  // 4 warps = 4 rows per block
  const int64_t grid = CeilDiv((int64_t)B * 32, kBlock);
  SoftmaxCrossEntropyKernel<<<grid, kBlock, 0, stream>>>(logits, labels, B, C, loss_scale, dlogits,
                                                         loss_sum, correct, bad_label,
                                                         divisor > 0 ? divisor : B);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchBiasGrad(const float* dy, int B, int O, float* db, cudaStream_t stream) {
  NvtxRange range("BiasGrad");
  SLUICE_CUDA_EXPECT(dy != nullptr && db != nullptr && B >= 0 && O > 0);
  BiasGradKernel<<<CeilDiv(O, 32), dim3(32, 8), 0, stream>>>(dy, B, O, db);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchCheckFinite(const float* x, int64_t n, int* found_inf, cudaStream_t stream,
                               int block_size) {
  NvtxRange range("CheckFinite");
  SLUICE_CUDA_EXPECT(x != nullptr && found_inf != nullptr && n >= 0);
  SLUICE_CUDA_EXPECT(block_size > 0 && block_size <= 1024 && block_size % 32 == 0);
  if (n == 0) return absl::OkStatus();
  CheckFiniteKernel<<<GridFor(n, block_size), block_size, 0, stream>>>(x, n, found_inf);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchOptimizerStep(const OptimizerStepArgs& a, cudaStream_t stream, int block_size) {
  NvtxRange range("OptimizerStep");
  SLUICE_CUDA_EXPECT(a.params != nullptr && a.grads != nullptr && a.scalars != nullptr);
  SLUICE_CUDA_EXPECT(a.n >= 0);
  SLUICE_CUDA_EXPECT(block_size > 0 && block_size <= 1024 && block_size % 32 == 0);
  const bool adam = a.config.kind == OptimizerKind::kAdamW;
  SLUICE_CUDA_EXPECT(!adam || (a.slot0 != nullptr && a.slot1 != nullptr));
  SLUICE_CUDA_EXPECT(adam || a.config.momentum == 0.0f || a.slot0 != nullptr);
  if (a.n == 0) return absl::OkStatus();
  OptimizerParams o{adam ? 1 : 0,   a.config.momentum, a.config.weight_decay, a.config.beta1,
                    a.config.beta2, a.config.eps,      a.config.nesterov};
  const int grid = GridFor(a.n, block_size);
  if (a.params_lp == nullptr || a.lp_type == DType::kF32) {
    OptimizerKernel<float><<<grid, block_size, 0, stream>>>(
        a.params, a.grads, a.slot0, a.slot1, static_cast<float*>(a.params_lp), a.n, o, a.scalars);
  } else if (a.lp_type == DType::kBF16) {
    OptimizerKernel<__nv_bfloat16><<<grid, block_size, 0, stream>>>(
        a.params, a.grads, a.slot0, a.slot1, static_cast<__nv_bfloat16*>(a.params_lp), a.n, o,
        a.scalars);
  } else {
    OptimizerKernel<__half><<<grid, block_size, 0, stream>>>(
        a.params, a.grads, a.slot0, a.slot1, static_cast<__half*>(a.params_lp), a.n, o, a.scalars);
  }
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchSetLr(StepScalars* scalars, float lr, cudaStream_t stream) {
  SLUICE_CUDA_EXPECT(scalars != nullptr);
  SetLrKernel<<<1, 1, 0, stream>>>(scalars, lr);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchFinishStep(StepScalars* scalars, bool dynamic_loss_scale, cudaStream_t stream) {
  SLUICE_CUDA_EXPECT(scalars != nullptr);
  FinishStepKernel<<<1, 1, 0, stream>>>(scalars, dynamic_loss_scale);
  cudaCheck(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace sluice::cuda_internal
