// NCCL, loaded when a data-parallel CUDA backend is created instead of when the program starts.
//
// libnccl is ~220 MB and most runs (one GPU, the CPU, the simulated device) never call it, so
// sluice does not link it (as with cuBLASLt, cublaslt_loader.h): LoadNccl() dlopens
// libnccl.so.<NCCL_MAJOR> by soname, then beside the loaded libcudart, and resolves the
// functions the backend calls.
//
// Errors: kUnavailable naming the library and dlerror()'s reason.
// Thread safety: LoadNccl may be called from any thread (the first call loads).
#ifndef SLUICE_ENGINE_CUDA_NCCL_LOADER_H_
#define SLUICE_ENGINE_CUDA_NCCL_LOADER_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/statusor.h"

namespace sluice::cuda_internal {

struct NcclApi {
  ncclResult_t (*GetUniqueId)(ncclUniqueId* id);
  ncclResult_t (*CommInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*AllReduce)(const void* send, void* recv, size_t count, ncclDataType_t type,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t comm, ncclResult_t* error);
  ncclResult_t (*CommAbort)(ncclComm_t comm);
  ncclResult_t (*CommDestroy)(ncclComm_t comm);
  const char* (*GetErrorString)(ncclResult_t result);
  int version = 0;  // ncclGetVersion: major * 10000 + minor * 100 + patch (NCCL >= 2.9)
};

// The loaded library's functions (valid for the life of the process).
absl::StatusOr<const NcclApi*> LoadNccl();

}  // namespace sluice::cuda_internal

#endif  // SLUICE_ENGINE_CUDA_NCCL_LOADER_H_
