// Builds without CUDA: there is never a device, so the pipeline delivers host batches.
#include "absl/status/status.h"
#include "pipeline/internal/device_uploader.h"

namespace sluice::pipeline_internal {

bool CudaDeviceAvailable() { return false; }

absl::StatusOr<std::unique_ptr<DeviceUploader>> DeviceUploader::Create(int, uint32_t, size_t,
                                                                       size_t) {
  return absl::UnavailableError("sluice was built without CUDA (SLUICE_CUDA=OFF)");
}

}  // namespace sluice::pipeline_internal
