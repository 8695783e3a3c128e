#include "engine/cuda/nccl_loader.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cublaslt_loader.h"

namespace sluice::cuda_internal {
namespace {

#define SLUICE_NCCL_STRINGIFY_INNER(x) #x
#define SLUICE_NCCL_STRINGIFY(x) SLUICE_NCCL_STRINGIFY_INNER(x)
constexpr char kSoname[] = "libnccl.so." SLUICE_NCCL_STRINGIFY(NCCL_MAJOR);

template <typename Fn>
bool Bind(void* handle, const char* name, Fn** fn) {
  *fn = reinterpret_cast<Fn*>(dlsym(handle, name));
  return *fn != nullptr;
}

absl::StatusOr<const NcclApi*> Load() {
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  std::string why;
  if (handle == nullptr) {
    why = dlerror();
    const std::string dir = CudaRuntimeDirectory();
    if (!dir.empty()) handle = dlopen((dir + "/" + kSoname).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot load ", kSoname, " (NCCL, the GPUs' gradient all-reduce): ", why,
                       dir.empty() ? "" : absl::StrCat("; also not in ", dir),
                       "; install NCCL or add its directory to LD_LIBRARY_PATH"));
    }
  }
  auto* api = new NcclApi;
  bool ok = Bind(handle, "ncclGetUniqueId", &api->GetUniqueId) &&
            Bind(handle, "ncclCommInitRank", &api->CommInitRank) &&
            Bind(handle, "ncclAllReduce", &api->AllReduce) &&
            Bind(handle, "ncclCommGetAsyncError", &api->CommGetAsyncError) &&
            Bind(handle, "ncclCommAbort", &api->CommAbort) &&
            Bind(handle, "ncclCommDestroy", &api->CommDestroy) &&
            Bind(handle, "ncclGetErrorString", &api->GetErrorString);
  if (!ok) {
    delete api;
    return absl::UnavailableError(
        absl::StrCat(kSoname, " lacks a function sluice calls: ", dlerror()));
  }
  ncclResult_t (*get_version)(int*) = nullptr;
  if (Bind(handle, "ncclGetVersion", &get_version)) get_version(&api->version);
  return api;
}

}  // namespace

absl::StatusOr<const NcclApi*> LoadNccl() {
  static const absl::StatusOr<const NcclApi*>* loaded = new absl::StatusOr<const NcclApi*>(Load());
  return *loaded;
}

}  // namespace sluice::cuda_internal
