// The simulated-device backend (--device sim): the CPU backend's kernels on the compute stream
// of a simulated accelerator (device/sim/sim_device.h), each step taking at least its modelled
// time. Everything above it is the code a GPU run executes (docs/sim.md); the results are
// bitwise those of the CPU backend with the same threads.
#ifndef SLUICE_ENGINE_SIM_SIM_BACKEND_H_
#define SLUICE_ENGINE_SIM_SIM_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "device/sim/sim_device.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"

namespace sluice {

struct SimBackendOptions {
  int ordinal = 0;            // the device is "sim:<ordinal>" (set by CreateBackend)
  device::SimOptions device;  // the link: bandwidth, latency, poison, jitter
  // The modelled compute time of a training step: at least compute_ns_per_step, and at least
  // batch / compute_samples_per_s (0: no bound from it).
  int64_t compute_ns_per_step = 0;
  double compute_samples_per_s = 0;
  // The host's cost of launching: a step is enqueued as `launches_per_step` launches, each
  // costing the host `launch_host_ns` (a spin, as a kernel launch's CPU time) before it is
  // enqueued; the last launch holds the kernels and the modelled time. A device faster than these
  // launches waits for each one inside the step: a launch-bound GPU step.
  int launches_per_step = 1;
  int64_t launch_host_ns = 0;
};

// Creates the sim backend; `cpu` configures the CPU kernels it runs. kInvalidArgument for a
// negative compute time or rate, else as CreateCpuBackend and device::OpenSimDevice.
absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const ModelState& state,
                                                          const OptimizerConfig& opt,
                                                          const BackendOptions& options,
                                                          const SimBackendOptions& sim = {},
                                                          const CpuBackendOptions& cpu = {});

}  // namespace sluice

#endif  // SLUICE_ENGINE_SIM_SIM_BACKEND_H_
