// cuBLASLt, loaded when the CUDA backend is created instead of when the program starts.
//
// Linking libcublasLt costs every process that starts ~150 MB of resident memory before main()
// (its static initializers touch ~85 MB of .bss and ~60 MB of code and relocations) and ~60 MB
// more at exit, and needs ~700 MB of address space (docs/limits.md). A CPU-only run uses none
// of it. So sluice does not link libcublasLt: cublaslt_loader.cc defines the cuBLASLt
// functions the backend calls (the declarations of <cublasLt.h>, so the callers are unchanged)
// as forwarders into libcublasLt.so.<CUBLAS_VER_MAJOR>, which LoadCublasLt() dlopens once.
//
// Errors: LoadCublasLt returns kUnavailable naming the library and dlerror()'s reason. A
// forwarded call made before a successful load returns CUBLAS_STATUS_NOT_INITIALIZED.
// Thread safety: LoadCublasLt may be called from any thread, any number of times (the first
// call loads; later calls return its result).
#ifndef SLUICE_ENGINE_CUDA_CUBLASLT_LOADER_H_
#define SLUICE_ENGINE_CUDA_CUBLASLT_LOADER_H_

#include <string>

#include "absl/status/status.h"

namespace sluice::cuda_internal {

// dlopens libcublasLt (by soname, as the dynamic linker would find it; then beside the loaded
// libcudart) and resolves every forwarded function.
absl::Status LoadCublasLt();

// The directory of the libcudart this process uses (the toolkit's lib directory), or "": where
// the run-time loaded CUDA libraries (cuBLASLt, NCCL) are looked for after the soname.
std::string CudaRuntimeDirectory();

// Whether libcublasLt is mapped into this process (by LoadCublasLt or anything else), read from
// /proc/self/maps: what the test of the lazy loading checks.
bool CublasLtIsMapped();

}  // namespace sluice::cuda_internal

#endif  // SLUICE_ENGINE_CUDA_CUBLASLT_LOADER_H_
