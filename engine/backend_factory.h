// CreateBackend: the backend a DeviceSpec names (--device, the ceilings' compute), with each
// platform's settings. The one place that maps a device to a platform's Create function.
//
//   BackendSpec spec;
//   spec.device = *device::ParseDeviceSpec("sim:1");
//   spec.options.max_batch = 64;
//   spec.sim.device.link_bytes_per_s = 25e9;
//   ASSIGN_OR_RETURN(auto backend, CreateBackend(spec, InitModelState(model, opt, seed), opt));
//
// Only the platform the device resolves to reads its settings; the others are ignored, so a
// caller may fill all of them before knowing which one "auto" picks.
#ifndef SLUICE_ENGINE_BACKEND_FACTORY_H_
#define SLUICE_ENGINE_BACKEND_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "device/device_spec.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/sim/sim_backend.h"

namespace sluice {

struct BackendSpec {
  device::DeviceSpec device;  // auto: CUDA device <ordinal or 0> when one is usable, else the CPU
  BackendOptions options;     // every platform's
  CpuBackendOptions cpu;      // the CPU backend, and the CPU kernels of the sim backend
  CudaBackendOptions cuda;    // ordinal: replaced by the device's (0 when it names none)
  SimBackendOptions sim;      // ordinal: likewise
};

// Errors: kUnavailable when CUDA is asked for and sluice was built without it or the device is
// not present ("--device cuda:3: only 2 CUDA device(s) present (cuda:0..cuda:1)"); else as the
// platform's Create function.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendSpec& spec,
                                                       const ModelState& state,
                                                       const OptimizerConfig& opt);

}  // namespace sluice

#endif  // SLUICE_ENGINE_BACKEND_FACTORY_H_
