#include "engine/cuda/linear_gemm.h"

#include <nvtx3/nvToolsExt.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_check.h"

namespace sluice::cuda_internal {
namespace {

cudaDataType_t CudaType(DType t) {
  switch (t) {
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

// Largest power of two <= 256 dividing the address: cuBLASLt's heuristics assume 256-byte
// aligned operands unless told otherwise, and our flat parameter buffer places the second
// layer's weight wherever the first layer's bias ends.
int Alignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && (v % (2 * a)) == 0) a *= 2;
  return p == nullptr ? 256 : a;
}

struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
};

}  // namespace

struct LinearGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool fused_epilogue = false;  // false: run plain, then LaunchBiasRelu
  ~Plan() {
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
  }
};

LinearGemm::LinearGemm(DType operand_type, void* workspace, size_t workspace_bytes)
    : operand_type_(operand_type), workspace_(workspace), workspace_bytes_(workspace_bytes) {}

absl::StatusOr<std::unique_ptr<LinearGemm>> LinearGemm::Create(DType operand_type, void* workspace,
                                                               size_t workspace_bytes) {
  std::unique_ptr<LinearGemm> g(new LinearGemm(operand_type, workspace, workspace_bytes));
  cublasCheck(cublasLtCreate(&g->handle_));
  return g;
}

LinearGemm::~LinearGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

absl::StatusOr<LinearGemm::Plan*> LinearGemm::GetPlan(const PlanKey& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto [ta, tb, m, n, k, lda, ldb, ldd, epilogue, align_a, align_b, align_d, align_bias] = key;
  const cudaDataType_t in = CudaType(operand_type_);
  auto plan = std::make_unique<Plan>();
  cublasCheck(cublasLtMatrixLayoutCreate(&plan->a, in, ta ? k : m, ta ? m : k, lda));
  cublasCheck(cublasLtMatrixLayoutCreate(&plan->b, in, tb ? n : k, tb ? k : n, ldb));
  cublasCheck(cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_32F, m, n, ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
    return cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value));
  };
  cublasStatus_t st =
      set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes_));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(align_a));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(align_b));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(align_d));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(align_d));

  // Try the fused epilogue first; fall back to a plain product plus LaunchBiasRelu.
  // A bias that is not 16-byte aligned (possible for odd layer widths in the flat parameter
  // buffer) goes straight to the fallback: cuBLASLt has no alignment preference for it.
  for (int attempt = align_bias < 16 ? 1 : 0; attempt < 2 && st == CUBLAS_STATUS_SUCCESS;
       ++attempt) {
    const int epi = attempt == 0 ? epilogue : 0;
    if (attempt == 1 && epilogue == 0 && plan->desc != nullptr) break;
    if (plan->desc) cublasLtMatmulDescDestroy(plan->desc);
    plan->desc = nullptr;
    st = cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st != CUBLAS_STATUS_SUCCESS) break;
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t e = epi == 2   ? CUBLASLT_EPILOGUE_RELU_BIAS
                           : epi == 1 ? CUBLASLT_EPILOGUE_BIAS
                                      : CUBLASLT_EPILOGUE_DEFAULT;
    cudaDataType_t bias_type = CUDA_R_32F;
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa));
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb));
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e));
    if (epi != 0) {
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                     sizeof(bias_type));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d,
                                        pref, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
      plan->algo = result.algo;
      plan->fused_epilogue = epi != 0;
      if (epilogue != 0 && epi == 0) ++epilogue_fallbacks_;
      cublasLtMatmulPreferenceDestroy(pref);
      Plan* raw = plan.get();
      plans_.emplace(key, std::move(plan));
      return raw;
    }
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
      st = CUBLAS_STATUS_SUCCESS;  // try the next attempt
      continue;
    }
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasCheck(st);
  return absl::InternalError(absl::StrCat("cuBLASLt has no algorithm for m=", m, " n=", n, " k=", k,
                                          " transA=", ta, " transB=", tb,
                                          "; hint: rerun with CUBLASLT_LOG_LEVEL=5"));
}

absl::Status LinearGemm::Matmul(bool trans_a, bool trans_b, int m, int n, int k, const void* a,
                                int lda, const void* b, int ldb, float* d, int ldd, int epilogue,
                                const float* bias, cudaStream_t stream) {
  SLUICE_CUDA_EXPECT(m > 0 && n > 0 && k > 0);
  SLUICE_CUDA_EXPECT(a != nullptr && b != nullptr && d != nullptr);
  SLUICE_CUDA_EXPECT(epilogue == 0 || bias != nullptr);
  PlanKey key{trans_a,
              trans_b,
              m,
              n,
              k,
              lda,
              ldb,
              ldd,
              epilogue,
              Alignment(a),
              Alignment(b),
              Alignment(d),
              epilogue ? Alignment(bias) : 256};
  ASSIGN_OR_RETURN(Plan * plan, GetPlan(key));
  if (plan->fused_epilogue) {
    cublasCheck(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                               sizeof(bias)));
  }
  const float alpha = 1.0f, beta = 0.0f;
  cublasCheck(cublasLtMatmul(handle_, plan->desc, &alpha, a, plan->a, b, plan->b, &beta, d, plan->d,
                             d, plan->d, &plan->algo, workspace_, workspace_bytes_, stream));
  if (epilogue != 0 && !plan->fused_epilogue) {
    // d is col-major [m, n] = row-major [n, m]: the bias runs along m, i.e. along each row.
    RETURN_IF_ERROR(LaunchBiasRelu(d, bias, n, m, epilogue == 2, stream));
  }
  return absl::OkStatus();
}

absl::Status LinearGemm::Forward(const void* x, const void* w, const float* bias, int B, int I,
                                 int O, bool relu, float* y, cudaStream_t stream) {
  NvtxRange range("LinearForward");
  SLUICE_CUDA_EXPECT(bias != nullptr);
  if (B == 0) return absl::OkStatus();
  return Matmul(/*trans_a=*/true, /*trans_b=*/false, O, B, I, w, I, x, I, y, O, relu ? 2 : 1, bias,
                stream);
}

absl::Status LinearGemm::BackwardWeights(const void* x, const void* dy, int B, int I, int O,
                                         float* dw, cudaStream_t stream) {
  NvtxRange range("LinearBackwardWeights");
  if (B == 0) {  // an empty batch contributes a zero gradient
    cudaCheck(cudaMemsetAsync(dw, 0, sizeof(float) * O * I, stream));
    return absl::OkStatus();
  }
  return Matmul(false, true, I, O, B, x, I, dy, O, dw, I, 0, nullptr, stream);
}

absl::Status LinearGemm::BackwardInput(const void* dy, const void* w, int B, int I, int O,
                                       float* dx, cudaStream_t stream) {
  NvtxRange range("LinearBackwardInput");
  if (B == 0) return absl::OkStatus();
  return Matmul(false, false, I, B, O, w, I, dy, O, dx, I, 0, nullptr, stream);
}

}  // namespace sluice::cuda_internal
