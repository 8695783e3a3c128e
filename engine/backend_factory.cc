#include "engine/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "device/device.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendSpec& spec,
                                                       const ModelState& state,
                                                       const OptimizerConfig& opt) {
  const device::DeviceSpec device = spec.device.Resolve();
  switch (device.platform) {
    case device::Platform::kCpu:
      return CreateCpuBackend(state, opt, spec.options, spec.cpu);
    case device::Platform::kSim: {
      SimBackendOptions sim = spec.sim;
      sim.ordinal = device.ordinal_or(0);
      return CreateSimBackend(state, opt, spec.options, sim, spec.cpu);
    }
    case device::Platform::kCuda: {
      CudaBackendOptions cuda = spec.cuda;
      cuda.ordinal = device.ordinal_or(0);
      const int count = device::CudaDeviceCount();
      // With no device at all, CreateCudaBackend says why (built without CUDA, no driver).
      if (count > 0 && cuda.ordinal >= count) {
        return absl::UnavailableError(
            absl::StrCat("--device ", device.ToString(), ": only ", count,
                         " CUDA device(s) present (cuda:0..cuda:", count - 1, ")"));
      }
      return CreateCudaBackend(state, opt, spec.options, cuda);
    }
    case device::Platform::kAuto:
      break;
  }
  return absl::InternalError(
      absl::StrCat("CreateBackend: device '", device.ToString(), "' did not resolve"));
}

}  // namespace sluice
