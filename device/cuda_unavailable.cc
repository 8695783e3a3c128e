// Builds without CUDA (SLUICE_CUDA=OFF or no nvcc): there is never a CUDA device.
#include "device/device.h"

namespace sluice::device {
namespace {
constexpr char kNoCuda[] =
    "sluice was built without CUDA (configure with -DSLUICE_CUDA=ON on a machine with the CUDA "
    "toolkit); use --device cpu or --device auto";
}  // namespace

int CudaDeviceCount() { return 0; }
absl::Status CudaDeviceStatus(int) { return absl::UnavailableError(kNoCuda); }
absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int) {
  return absl::UnavailableError(kNoCuda);
}

}  // namespace sluice::device
