#include "device/device_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "device/device.h"

namespace sluice::device {

absl::string_view PlatformName(Platform platform) {
  switch (platform) {
    case Platform::kAuto:
      return "auto";
    case Platform::kCpu:
      return "cpu";
    case Platform::kCuda:
      return "cuda";
    case Platform::kSim:
      return "sim";
  }
  return "unknown";
}

std::string DeviceSpec::ToString() const {
  if (!has_ordinal()) return std::string(PlatformName(platform));
  return absl::StrCat(PlatformName(platform), ":", ordinal);
}

DeviceSpec DeviceSpec::Resolve() const {
  if (platform != Platform::kAuto) return *this;
  DeviceSpec resolved = *this;
  resolved.platform = CudaDeviceCount() > 0 ? Platform::kCuda : Platform::kCpu;
  return resolved;
}

absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text) {
  auto invalid = [text] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not auto, cpu, sim[:N] or cuda[:N]"));
  };
  DeviceSpec spec;
  const size_t colon = text.find(':');
  const absl::string_view name = text.substr(0, colon);
  if (name == "auto") {
    spec.platform = Platform::kAuto;
  } else if (name == "cpu") {
    spec.platform = Platform::kCpu;
  } else if (name == "cuda") {
    spec.platform = Platform::kCuda;
  } else if (name == "sim") {
    spec.platform = Platform::kSim;
  } else {
    return invalid();
  }
  if (colon == absl::string_view::npos) return spec;
  // Only devices that have several instances take an ordinal; digits only ("cuda:+1" and
  // "cuda: 1" are refused, as a user would not mean them).
  const absl::string_view digits = text.substr(colon + 1);
  if (!spec.uploads() || digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(digits, &spec.ordinal)) {
    return invalid();
  }
  return spec;
}

}  // namespace sluice::device
