// DeviceSpec: a device as a user names it (--device, sluice.Loader(device=...), the ceilings'
// cache key), parsed in this one place:
//
//   auto | cpu | cuda | cuda:N | sim | sim:N
//
// "auto" is the first CUDA device when one is usable, else the CPU (Resolve). "cuda" and
// "sim" without an ordinal leave the choice to the caller (device 0, or the local rank in a
// data-parallel run). Who opens the device reads `platform` and `ordinal`, never the text.
// Thread safety: plain values.
#ifndef SLUICE_DEVICE_DEVICE_SPEC_H_
#define SLUICE_DEVICE_DEVICE_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::device {

// What runs the steps: the host (OpenBLAS), a CUDA GPU, or the simulated accelerator
// (device/sim/). kAuto exists only in a spec, before Resolve.
enum class Platform : uint8_t { kAuto, kCpu, kCuda, kSim };

// "auto", "cpu", "cuda", "sim".
absl::string_view PlatformName(Platform platform);

struct DeviceSpec {
  static constexpr int kNoOrdinal = -1;

  Platform platform = Platform::kAuto;
  int ordinal = kNoOrdinal;  // >= 0 when the text named one ("cuda:1"); cpu and auto: none

  bool has_ordinal() const { return ordinal >= 0; }
  int ordinal_or(int fallback) const { return has_ordinal() ? ordinal : fallback; }
  // Batches are uploaded to a device (CUDA or sim) rather than read from host memory.
  bool uploads() const { return platform == Platform::kCuda || platform == Platform::kSim; }
  // The spec as a user writes it: "auto", "cpu", "cuda", "cuda:1", "sim", "sim:0".
  std::string ToString() const;
  // kAuto becomes kCuda (keeping the ordinal) when CudaDeviceCount() > 0, else kCpu;
  // every other platform is returned as it is.
  DeviceSpec Resolve() const;

  friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

// Parses `text` (the grammar above). kInvalidArgument otherwise:
// "'tpu' is not auto, cpu, sim[:N] or cuda[:N]".
absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text);

}  // namespace sluice::device

#endif  // SLUICE_DEVICE_DEVICE_SPEC_H_
