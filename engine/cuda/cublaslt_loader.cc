#include "engine/cuda/cublaslt_loader.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice::cuda_internal {
namespace {

#define SLUICE_STRINGIFY_INNER(x) #x
#define SLUICE_STRINGIFY(x) SLUICE_STRINGIFY_INNER(x)
// The soname of the cuBLASLt sluice was compiled against (<cublas_api.h>).
constexpr char kSoname[] = "libcublasLt.so." SLUICE_STRINGIFY(CUBLAS_VER_MAJOR);

struct Library {
  void* handle = nullptr;
  absl::Status status;
};

const Library& Loaded() {
  static const Library* library = [] {
    auto* l = new Library;
    // RTLD_LOCAL: the forwarders below, not the dynamic linker, bind to its symbols.
    l->handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (l->handle == nullptr) {
      const std::string first = dlerror();
      const std::string dir = CudaRuntimeDirectory();
      if (!dir.empty()) l->handle = dlopen((dir + "/" + kSoname).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (l->handle == nullptr) {
        l->status = absl::UnavailableError(
            absl::StrCat("cannot load ", kSoname,
                         " (the CUDA backend's GEMM library, part of the CUDA "
                         "toolkit): ",
                         first, dir.empty() ? "" : absl::StrCat("; also not in ", dir),
                         "; add its directory to LD_LIBRARY_PATH, or use --device cpu"));
      }
    }
    return l;
  }();
  return *library;
}

// The function `name` of the loaded library, or null when it is not loaded.
template <typename Fn>
Fn* Resolve(const char* name) {
  const Library& l = Loaded();
  if (l.handle == nullptr) return nullptr;
  return reinterpret_cast<Fn*>(dlsym(l.handle, name));
}

}  // namespace

// The directory of the libcudart this process uses (the toolkit's lib directory), or "".
std::string CudaRuntimeDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

absl::Status LoadCublasLt() {
  const Library& l = Loaded();
  if (!l.status.ok()) return l.status;
  for (const char* name :
       {"cublasLtCreate", "cublasLtDestroy", "cublasLtGetStatusName", "cublasLtGetStatusString",
        "cublasLtMatmul", "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmulDescCreate",
        "cublasLtMatmulDescDestroy", "cublasLtMatmulDescSetAttribute",
        "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy",
        "cublasLtMatmulPreferenceSetAttribute", "cublasLtMatrixLayoutCreate",
        "cublasLtMatrixLayoutDestroy"}) {
    if (dlsym(l.handle, name) == nullptr) {
      return absl::UnavailableError(absl::StrCat(kSoname, " has no ", name,
                                                 " (a different CUDA version than sluice was "
                                                 "built for?)"));
    }
  }
  return absl::OkStatus();
}

bool CublasLtIsMapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (absl::StrContains(line, "/libcublasLt.so")) return true;
  }
  return false;
}

}  // namespace sluice::cuda_internal

// The forwarders: exactly the declarations of <cublasLt.h> (the compiler checks each against
// it), each resolving its target once.
#define SLUICE_CUBLASLT_FORWARD(name, params, args)                                  \
  cublasStatus_t CUBLASWINAPI name params {                                          \
    static auto* const fn = ::sluice::cuda_internal::Resolve<decltype(name)>(#name); \
    return fn == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : fn args;                  \
  }

extern "C" {

SLUICE_CUBLASLT_FORWARD(cublasLtCreate, (cublasLtHandle_t * handle), (handle))
SLUICE_CUBLASLT_FORWARD(cublasLtDestroy, (cublasLtHandle_t handle), (handle))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmul,
                        (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                         const void* a, cublasLtMatrixLayout_t a_desc, const void* b,
                         cublasLtMatrixLayout_t b_desc, const void* beta, const void* c,
                         cublasLtMatrixLayout_t c_desc, void* d, cublasLtMatrixLayout_t d_desc,
                         const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                         cudaStream_t stream),
                        (handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc,
                         algo, workspace, workspace_bytes, stream))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulAlgoGetHeuristic,
                        (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                         cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                         cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                         cublasLtMatmulPreference_t preference, int requested,
                         cublasLtMatmulHeuristicResult_t results[], int* returned),
                        (handle, desc, a_desc, b_desc, c_desc, d_desc, preference, requested,
                         results, returned))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulDescCreate,
                        (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute_type,
                         cudaDataType_t scale_type),
                        (desc, compute_type, scale_type))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulDescSetAttribute,
                        (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                         const void* buf, size_t bytes),
                        (desc, attr, buf, bytes))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
SLUICE_CUBLASLT_FORWARD(cublasLtMatmulPreferenceSetAttribute,
                        (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                         const void* buf, size_t bytes),
                        (pref, attr, buf, bytes))
SLUICE_CUBLASLT_FORWARD(cublasLtMatrixLayoutCreate,
                        (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,
                         uint64_t cols, int64_t ld),
                        (layout, type, rows, cols, ld))
SLUICE_CUBLASLT_FORWARD(cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  static auto* const fn =
      ::sluice::cuda_internal::Resolve<decltype(cublasLtGetStatusName)>("cublasLtGetStatusName");
  return fn == nullptr ? "(cuBLASLt not loaded)" : fn(status);
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  static auto* const fn = ::sluice::cuda_internal::Resolve<decltype(cublasLtGetStatusString)>(
      "cublasLtGetStatusString");
  return fn == nullptr ? "cuBLASLt is not loaded" : fn(status);
}

}  // extern "C"
