// LinearGemm: the three matrix products of a Linear layer on cuBLASLt, in PyTorch's row-major
// layout (W is [out, in]).
//
// cuBLASLt is column-major. A row-major [r, c] buffer read column-major is its transpose
// [c, r] with leading dimension c, so every product below is written for the transposes:
//   forward   y[B,O]  = x[B,I] W^T + b  <=>  y^T[O,B]  = W[O,I] x^T[I,B]
//             A = W buffer (col-major [I,O], ld I) with op T, B = x buffer ([I,B], ld I) op N,
//             m = O, n = B, k = I; the bias (length m = O) and ReLU are the epilogue
//             CUBLASLT_EPILOGUE_RELU_BIAS / _BIAS.
//   weights   dW[O,I] = dy^T[O,B] x[B,I]  <=>  dW^T[I,O] = x^T[I,B] dy[B,O]
//             A = x buffer ([I,B], ld I) op N, B = dy buffer ([O,B], ld O) op T,
//             m = I, n = O, k = B.
//   input     dx[B,I] = dy[B,O] W[O,I]    <=>  dx^T[I,B] = W^T[I,O] dy^T[O,B]
//             A = W buffer ([I,O], ld I) op N, B = dy buffer ([O,B], ld O) op N,
//             m = I, n = B, k = O.
// Operands (x, W, dy) are `operand_type` (f32, or bf16/f16 in the reduced-precision modes);
// outputs and the bias are always f32, accumulation is f32 (CUBLAS_COMPUTE_32F: no TF32, so the
// fp32 mode matches the CPU reference closely).
//
// When cuBLASLt offers no algorithm with the bias/ReLU epilogue for a shape, the plain product
// runs and LaunchBiasRelu applies the epilogue; epilogue_fallbacks() counts those shapes.
//
// Ownership: owns its cuBLASLt handle and plan cache; borrows the workspace (device memory
// owned by the backend's allocator). Errors: absl::Status from cudaCheck/cublasCheck, or
// kInvalidArgument for bad shapes. Thread safety: one thread at a time (like the backend).
#ifndef SLUICE_ENGINE_CUDA_LINEAR_GEMM_H_
#define SLUICE_ENGINE_CUDA_LINEAR_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <tuple>

#include "absl/status/statusor.h"
#include "engine/cuda/kernels.h"

namespace sluice::cuda_internal {

class LinearGemm {
 public:
  static absl::StatusOr<std::unique_ptr<LinearGemm>> Create(DType operand_type, void* workspace,
                                                            size_t workspace_bytes);
  ~LinearGemm();
  LinearGemm(const LinearGemm&) = delete;
  LinearGemm& operator=(const LinearGemm&) = delete;

  // y = x W^T + bias, then ReLU when `relu`.
  absl::Status Forward(const void* x, const void* w, const float* bias, int B, int I, int O,
                       bool relu, float* y, cudaStream_t stream);
  // dW = dy^T x.
  absl::Status BackwardWeights(const void* x, const void* dy, int B, int I, int O, float* dw,
                               cudaStream_t stream);
  // dx = dy W.
  absl::Status BackwardInput(const void* dy, const void* w, int B, int I, int O, float* dx,
                             cudaStream_t stream);

  DType operand_type() const { return operand_type_; }
  int epilogue_fallbacks() const { return epilogue_fallbacks_; }

 private:
  struct Plan;
  // (transA, transB, m, n, k, lda, ldb, ldd, epilogue, align A, align B, align D, align bias)
  using PlanKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, int>;

  LinearGemm(DType operand_type, void* workspace, size_t workspace_bytes);
  absl::StatusOr<Plan*> GetPlan(const PlanKey& key);
  // D[m,n] (col-major, ld ldd) = op(A) op(B) with the epilogue (0 none, 1 bias, 2 relu+bias).
  absl::Status Matmul(bool trans_a, bool trans_b, int m, int n, int k, const void* a, int lda,
                      const void* b, int ldb, float* d, int ldd, int epilogue, const float* bias,
                      cudaStream_t stream);

  DType operand_type_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtHandle_t handle_ = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  int epilogue_fallbacks_ = 0;
};

}  // namespace sluice::cuda_internal

#endif  // SLUICE_ENGINE_CUDA_LINEAR_GEMM_H_
