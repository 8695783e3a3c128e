// The CPU backend's kernels: the sparse-input kernels use AVX-512 intrinsics (keeping 8
// accumulators of 16 floats in registers across a row's nonzeros is what makes them beat the
// dense sgemm, and a compiler cannot be relied on to do that from plain loops); the dense ones
// call OpenBLAS; the element-wise loops are built once per instruction-set level
// (internal/elementwise.h) and called here through the table of the level this CPU may use.
#include "engine/cpu/internal/cpu_kernels.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/cpu_isa.h"
#include "engine/cpu/internal/elementwise.h"
#include "tbb/blocked_range.h"
#include "tbb/parallel_for.h"

#define SLUICE_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,popcnt")))

namespace sluice::cpu_internal {

bool SparseKernelsAvailable() { return UsableCpuIsa() >= CpuIsa::kAvx512; }

const ElementwiseKernels& Elementwise() {
  static const ElementwiseKernels& picked = []() -> const ElementwiseKernels& {
#if defined(__x86_64__)
    switch (UsableCpuIsa()) {
      case CpuIsa::kAvx512:
        return avx512::kElementwise;
      case CpuIsa::kAvx2:
        return avx2::kElementwise;
      case CpuIsa::kBaseline:
        break;
    }
#endif
    return baseline::kElementwise;
  }();
  return picked;
}

namespace {

// Runs body(begin, end) over [0, n), on the calling thread or split across TBB workers.
// Each index is handled by exactly one call, so results do not depend on the split.
template <typename Body>
void ForRange(int n, int threads, Body body) {
  if (threads <= 1 || n < 2) {
    body(0, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int>(0, n, std::max(1, n / (4 * threads))),
                    [&](const tbb::blocked_range<int>& r) { body(r.begin(), r.end()); });
}

SLUICE_AVX512 inline __mmask16 TailMask(int remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF)
                         : static_cast<__mmask16>((1u << remaining) - 1);
}

// One chunk of up to 16*NV outputs of one row: y[o0 .. o0+width) = bias + sum_j v_j W^T[i_j].
template <int NV>
SLUICE_AVX512 void ForwardRowChunk(const int32_t* index, const float* value, int nnz,
                                   const float* wt, int O, int o0, int width, const float* bias,
                                   bool relu, float* y) {
  __m512 acc[NV];
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    mask[v] = TailMask(width - 16 * v);
    acc[v] = _mm512_maskz_loadu_ps(mask[v], bias + o0 + 16 * v);
  }
  for (int j = 0; j < nnz; ++j) {
    const float* w = wt + int64_t{index[j]} * O + o0;
    const __m512 x = _mm512_set1_ps(value[j]);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      acc[v] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mask[v], w + 16 * v), acc[v]);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    __m512 out = relu ? _mm512_maskz_max_ps(0xFFFF, acc[v], _mm512_setzero_ps()) : acc[v];
    _mm512_mask_storeu_ps(y + o0 + 16 * v, mask[v], out);
  }
}

// One chunk of dW^T[i, o0 .. o0+width) = sum over the column's rows b of x[b, i] dy[b, :].
template <int NV>
SLUICE_AVX512 void WeightGradChunk(const int32_t* rows, const float* value, int nnz,
                                   const float* dy, int O, int o0, int width, float* dwt_row) {
  __m512 acc[NV];
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    mask[v] = TailMask(width - 16 * v);
    acc[v] = _mm512_setzero_ps();
  }
  for (int j = 0; j < nnz; ++j) {
    const float* g = dy + int64_t{rows[j]} * O + o0;
    const __m512 x = _mm512_set1_ps(value[j]);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      acc[v] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(mask[v], g + 16 * v), acc[v]);
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(dwt_row + o0 + 16 * v, mask[v], acc[v]);
}

// Calls kernel<NV>(...) with NV = ceil(width / 16), 1..8.
#define SLUICE_DISPATCH_NV(kernel, width, ...) \
  switch (((width) + 15) / 16) {               \
    case 1:                                    \
      kernel<1>(__VA_ARGS__);                  \
      break;                                   \
    case 2:                                    \
      kernel<2>(__VA_ARGS__);                  \
      break;                                   \
    case 3:                                    \
      kernel<3>(__VA_ARGS__);                  \
      break;                                   \
    case 4:                                    \
      kernel<4>(__VA_ARGS__);                  \
      break;                                   \
    case 5:                                    \
      kernel<5>(__VA_ARGS__);                  \
      break;                                   \
    case 6:                                    \
      kernel<6>(__VA_ARGS__);                  \
      break;                                   \
    case 7:                                    \
      kernel<7>(__VA_ARGS__);                  \
      break;                                   \
    default:                                   \
      kernel<8>(__VA_ARGS__);                  \
      break;                                   \
  }

constexpr int kChunk = 128;  // outputs per register-resident chunk (8 x 16 floats)

SLUICE_AVX512 int64_t BuildSparseRowsAvx512(const float* x, int B, int I, SparseInput* s) {
  int64_t total = 0;
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int b = 0; b < B; ++b) {
    const float* row = x + int64_t{b} * I;
    int32_t* index = s->row_index + int64_t{b} * I;
    float* value = s->row_value + int64_t{b} * I;
    int n = 0;
    for (int i = 0; i < I; i += 16) {
      const __mmask16 valid = TailMask(I - i);
      const __m512 v = _mm512_maskz_loadu_ps(valid, row + i);
      const __mmask16 nonzero = _mm512_mask_cmp_ps_mask(valid, v, _mm512_setzero_ps(), _CMP_NEQ_UQ);
      const __m512i ids = _mm512_add_epi32(_mm512_set1_epi32(i), lane);
      // Compress into a register, then a plain store: compress-to-memory is microcoded and slow
      // on some cores. The store may write up to 16 lanes past this row's nonzeros.
      _mm512_storeu_si512(index + n, _mm512_maskz_compress_epi32(nonzero, ids));
      _mm512_storeu_ps(value + n, _mm512_maskz_compress_ps(nonzero, v));
      n += __builtin_popcount(nonzero);
    }
    s->row_nnz[b] = n;
    total += n;
  }
  return total;
}

SLUICE_AVX512 void SparseLinearForwardAvx512(const SparseInput& s, const float* wt,
                                             const float* bias, int B, int O, bool relu, float* y,
                                             int I, int threads) {
  ForRange(B, threads, [&](int begin, int end) {
    for (int b = begin; b < end; ++b) {
      const int32_t* index = s.row_index + int64_t{b} * I;
      const float* value = s.row_value + int64_t{b} * I;
      for (int o0 = 0; o0 < O; o0 += kChunk) {
        const int width = std::min(kChunk, O - o0);
        SLUICE_DISPATCH_NV(ForwardRowChunk, width, index, value, s.row_nnz[b], wt, O, o0, width,
                           bias, relu, y + int64_t{b} * O);
      }
    }
  });
}

SLUICE_AVX512 void SparseWeightGradAvx512(const SparseInput& s, const float* dy, int I, int O,
                                          float* dwt, int threads) {
  ForRange(I, threads, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) {
      const int32_t* rows = s.col_row + int64_t{i} * s.max_batch;
      const float* value = s.col_value + int64_t{i} * s.max_batch;
      for (int o0 = 0; o0 < O; o0 += kChunk) {
        const int width = std::min(kChunk, O - o0);
        SLUICE_DISPATCH_NV(WeightGradChunk, width, rows, value, s.col_nnz[i], dy, O, o0, width,
                           dwt + int64_t{i} * O);
      }
    }
  });
}

}  // namespace

int64_t BuildSparseRows(const float* x, int B, int I, SparseInput* s) {
  return BuildSparseRowsAvx512(x, B, I, s);
}

void BuildSparseColumns(int B, int I, SparseInput* s) {
  std::memset(s->col_nnz, 0, sizeof(int32_t) * I);
  for (int b = 0; b < B; ++b) {
    const int32_t* index = s->row_index + int64_t{b} * I;
    const float* value = s->row_value + int64_t{b} * I;
    for (int j = 0, n = s->row_nnz[b]; j < n; ++j) {
      const int64_t slot = int64_t{index[j]} * s->max_batch + s->col_nnz[index[j]]++;
      s->col_row[slot] = b;
      s->col_value[slot] = value[j];
    }
  }
}

void SparseLinearForward(const SparseInput& s, const float* wt, const float* bias, int B, int O,
                         bool relu, float* y, int threads) {
  SparseLinearForwardAvx512(s, wt, bias, B, O, relu, y, s.row_stride, threads);
}

}  // namespace sluice::cpu_internal

namespace sluice::cpu_internal {

void SparseWeightGrad(const SparseInput& s, const float* dy, int I, int O, float* dwt,
                      int threads) {
  SparseWeightGradAvx512(s, dy, I, O, dwt, threads);
}

void DenseLinearForward(const float* x, const float* wt, const float* bias, int B, int I, int O,
                        bool relu, float* y) {
  for (int b = 0; b < B; ++b) std::memcpy(y + int64_t{b} * O, bias, sizeof(float) * O);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, O, I, 1.0f, x, I, wt, O, 1.0f, y, O);
  if (relu) {
    const int64_t n = int64_t{B} * O;
    for (int64_t k = 0; k < n; ++k) y[k] = std::max(y[k], 0.0f);
  }
}

void DenseWeightGradRows(const float* x, const float* dy, int B, int I, int O, int i0, int i1,
                         float* dwt) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1 - i0, O, B, 1.0f, x + i0, I, dy, O, 0.0f,
              dwt + int64_t{i0} * O, O);
}

void DenseSgdStepRows(const float* x, const float* dy, int B, int I, int O, int i0, int i1,
                      float lr, float* wt) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1 - i0, O, B, -lr, x + i0, I, dy, O, 1.0f,
              wt + int64_t{i0} * O, O);
}

void DenseInputGrad(const float* wt, const float* dy, int B, int I, int O, float* dx) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, I, O, 1.0f, dy, O, wt, O, 0.0f, dx, I);
}

void AddInPlace(const float* src, int64_t n, float* dst) {
  Elementwise().add_in_place(src, n, dst);
}

void BiasGrad(const float* dy, int B, int O, float* db) { Elementwise().bias_grad(dy, B, O, db); }

void ReluBackwardInPlace(const float* y, int64_t n, float* dx) {
  Elementwise().relu_backward(y, n, dx);
}

void NormalizeU8(const uint8_t* in, int64_t n, float mean, float std, float* out) {
  Elementwise().normalize_u8(in, n, mean, std, out);
}

void HalfToFloat(const uint16_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = in[i];
    const uint32_t sign = (h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x3FFu;
    uint32_t bits;
    if (exponent == 0x1F) {
      bits = sign | 0x7F800000u | (mantissa << 13);  // inf / nan
    } else if (exponent != 0) {
      bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      bits = sign;  // +-0
    } else {        // subnormal: renormalize
      exponent = 113;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
    }
    std::memcpy(out + i, &bits, sizeof(bits));
  }
}

void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int B, int C, float* dlogits,
                         double* loss_sum, int64_t* correct, int divisor) {
  const float inv_batch = 1.0f / static_cast<float>(divisor > 0 ? divisor : B);
  for (int b = 0; b < B; ++b) {
    const float* row = logits + int64_t{b} * C;
    int argmax = 0;
    for (int c = 1; c < C; ++c) {
      if (row[c] > row[argmax]) argmax = c;
    }
    const float max_logit = row[argmax];
    float sum_exp = 0.0f;
    float* grad = dlogits != nullptr ? dlogits + int64_t{b} * C : nullptr;
    for (int c = 0; c < C; ++c) {
      const float e = std::exp(row[c] - max_logit);
      sum_exp += e;
      if (grad != nullptr) grad[c] = e;
    }
    const int label = labels[b];
    *loss_sum += std::log(static_cast<double>(sum_exp)) - (row[label] - max_logit);
    if (argmax == label) ++*correct;
    if (grad != nullptr) {
      const float scale = inv_batch / sum_exp;
      for (int c = 0; c < C; ++c) grad[c] *= scale;
      grad[label] -= inv_batch;
    }
  }
}

void SgdUpdate(float* p, const float* grad, float* momentum_buf, int64_t n, float lr,
               float momentum, bool nesterov, float weight_decay, bool first_step) {
  Elementwise().sgd(p, grad, momentum_buf, n, lr, momentum, nesterov, weight_decay, first_step);
}

void AdamWUpdate(float* p, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step) {
  const float bias_correction1 = static_cast<float>(1.0 - std::pow(double{beta1}, step));
  const float bias_correction2 = static_cast<float>(1.0 - std::pow(double{beta2}, step));
  const float step_size = lr / bias_correction1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bias_correction2);
  const float decay = 1.0f - lr * weight_decay;
  Elementwise().adamw(p, grad, m, v, n, beta1, beta2, eps, step_size, inv_sqrt_bc2, decay);
}

}  // namespace sluice::cpu_internal
