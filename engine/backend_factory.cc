#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/backend.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(absl::string_view device,
                                                       const ModelState& state,
                                                       const OptimizerConfig& opt,
                                                       BackendOptions options) {
  if (device == "cpu") return CreateCpuBackend(state, opt, options);
  if (device == "sim" || absl::StartsWith(device, "sim:")) {
    options.device_ordinal = 0;
    if (device != "sim" && (!absl::SimpleAtoi(device.substr(4), &options.device_ordinal) ||
                            options.device_ordinal < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device: '", device, "' is not auto, cpu, sim[:N] or cuda[:N]"));
    }
    return CreateSimBackend(state, opt, options);
  }
  if (device == "auto") {
    if (device::CudaDeviceCount() > 0) return CreateCudaBackend(state, opt, options);
    return CreateCpuBackend(state, opt, options);
  }
  if (device == "cuda" || absl::StartsWith(device, "cuda:")) {
    if (device != "cuda") {
      int ordinal = -1;
      if (!absl::SimpleAtoi(device.substr(5), &ordinal) || ordinal < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--device: '", device, "' is not auto, cpu, sim[:N] or cuda[:N]"));
      }
      options.device_ordinal = ordinal;
    } else {
      options.device_ordinal = 0;
    }
    const int count = device::CudaDeviceCount();
    if (count == 0) {
      // CreateCudaBackend says why (built without CUDA, no driver, no device).
      return CreateCudaBackend(state, opt, options);
    }
    if (options.device_ordinal >= count) {
      return absl::UnavailableError(absl::StrCat("--device ", device, ": only ", count,
                                                 " CUDA device(s) present (cuda:0..cuda:",
                                                 count - 1, ")"));
    }
    return CreateCudaBackend(state, opt, options);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device: '", device, "' is not auto, cpu, sim[:N] or cuda[:N]"));
}

}  // namespace sluice
