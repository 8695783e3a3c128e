// Stand-ins for the CUDA backend when sluice is built without CUDA (SLUICE_CUDA=OFF or no
// nvcc), so that --device auto falls back to the CPU and --device cuda fails clearly.
#include "engine/cuda/cuda_backend.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelState&,
                                                           const OptimizerConfig&,
                                                           const BackendOptions&,
                                                           const CudaBackendOptions&) {
  return absl::UnavailableError(
      "sluice was built without CUDA (configure with -DSLUICE_CUDA=ON on a machine with the "
      "CUDA toolkit); use --device cpu or --device auto");
}

}  // namespace sluice
