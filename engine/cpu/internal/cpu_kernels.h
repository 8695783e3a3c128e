// The CPU backend's fast kernels. Weights are stored input-major, W^T [I, O] (the transpose of
// PyTorch's [O, I]), so that a nonzero input x[b, i] touches one contiguous row W^T[i, :]: the
// sparse-input kernels below skip the zero pixels of MNIST-like inputs (about half of
// Fashion-MNIST, four fifths of MNIST), which halves the work of the first layer.
// Every kernel is deterministic: each output element is computed by one thread in a fixed order.
// Thread safety: stateless; callers own the buffers.
#ifndef SLUICE_ENGINE_CPU_INTERNAL_CPU_KERNELS_H_
#define SLUICE_ENGINE_CPU_INTERNAL_CPU_KERNELS_H_

#include <cstdint>

namespace sluice::cpu_internal {

// True when the AVX-512 sparse-input kernels can run on this CPU.
bool SparseKernelsAvailable();

// The nonzeros of a [B, I] input, by row and by column. Capacities: row_index/row_value
// max_batch * I + 16 (the AVX-512 compaction stores 16 lanes past the end of a row),
// col_row/col_value I * max_batch, row_nnz max_batch, col_nnz I.
struct SparseInput {
  int32_t* row_index;
  float* row_value;
  int32_t* row_nnz;
  int32_t* col_row;
  float* col_value;
  int32_t* col_nnz;
  int max_batch;
  int row_stride;  // I: row b's lists start at b * row_stride
};

// Fills the row lists of `x` [B, I]; returns the number of nonzeros. Requires
// SparseKernelsAvailable().
int64_t BuildSparseRows(const float* x, int B, int I, SparseInput* s);
// Fills the column lists from the row lists (rows in increasing order).
void BuildSparseColumns(int B, int I, SparseInput* s);

// y[B, O] = x * W^T + b (then ReLU when `relu`), x given by its row lists.
void SparseLinearForward(const SparseInput& s, const float* wt, const float* bias, int B, int O,
                         bool relu, float* y, int threads);
// dW^T[I, O] = x^T dy, x given by its column lists.
void SparseWeightGrad(const SparseInput& s, const float* dy, int I, int O, float* dwt, int threads);

// Dense equivalents through OpenBLAS cblas_sgemm.
void DenseLinearForward(const float* x, const float* wt, const float* bias, int B, int I, int O,
                        bool relu, float* y);
// Rows [i0, i1) of dW^T [I, O] = x^T dy, over all B samples of x [B, I] and dy [B, O]: the
// rows of the weight gradient are independent, so threads may split them (cpu_backend.cc).
void DenseWeightGradRows(const float* x, const float* dy, int B, int I, int O, int i0, int i1,
                         float* dwt);
// Plain SGD (no momentum, no weight decay) on rows [i0, i1) of W^T, with the gradient never
// stored: W^T -= lr * x^T dy in one sgemm (beta = 1), which saves sgemm's pass that zeroes the
// gradient, the gradient's stores and the optimizer's pass over it.
void DenseSgdStepRows(const float* x, const float* dy, int B, int I, int O, int i0, int i1,
                      float lr, float* wt);
// dx [B, I] = dy W, with W given as W^T [I, O].
void DenseInputGrad(const float* wt, const float* dy, int B, int I, int O, float* dx);

// dst[i] += src[i]: one slice's gradients added into the sum (cpu_backend.cc).
void AddInPlace(const float* src, int64_t n, float* dst);
// db[o] = sum over b of dy[b, o], summed in batch order.
void BiasGrad(const float* dy, int B, int O, float* db);
// dx[i] = y[i] > 0 ? dx[i] : 0.
void ReluBackwardInPlace(const float* y, int64_t n, float* dx);
// (in / 255 - mean) / std, bitwise equal to ref::NormalizeU8.
void NormalizeU8(const uint8_t* in, int64_t n, float mean, float std, float* out);
// IEEE binary16 -> binary32 (exact).
void HalfToFloat(const uint16_t* in, int64_t n, float* out);
// As ref::SoftmaxCrossEntropy; dlogits may be null (evaluation). The gradient is divided by
// `divisor` samples (0: by B): a data-parallel rank divides by the global batch's size.
void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int B, int C, float* dlogits,
                         double* loss_sum, int64_t* correct, int divisor = 0);

// Optimizer updates with torch.optim semantics (see ref::SgdStep / ref::AdamWStep).
void SgdUpdate(float* p, const float* grad, float* momentum_buf, int64_t n, float lr,
               float momentum, bool nesterov, float weight_decay, bool first_step);
void AdamWUpdate(float* p, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
                 float beta2, float eps, float weight_decay, int64_t step);

}  // namespace sluice::cpu_internal

#endif  // SLUICE_ENGINE_CPU_INTERNAL_CPU_KERNELS_H_
