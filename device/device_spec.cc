#include "device/device_spec.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/printable.h"
#include "device/device.h"

namespace sluice::device {

namespace {
constexpr auto kPlatformNames = MakeEnumNames<Platform>({{Platform::kAuto, "auto"},
                                                         {Platform::kCpu, "cpu"},
                                                         {Platform::kCuda, "cuda"},
                                                         {Platform::kSim, "sim"}});
}  // namespace

absl::string_view PlatformName(Platform platform) { return kPlatformNames.Name(platform); }

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
        absl::StrCat("'", Printable(text), "' is not auto, cpu, sim[:N] or cuda[:N]"));
  };
  DeviceSpec spec;
  const size_t colon = text.find(':');
  const std::optional<Platform> platform = kPlatformNames.Parse(text.substr(0, colon));
  if (!platform) return invalid();
  spec.platform = *platform;
  if (colon == absl::string_view::npos) return spec;
  // Only devices that have several instances take an ordinal; digits only, no leading zero
  // ("cuda:+1", "cuda: 1" and "cuda:01" are refused, as a user would not mean them).
  const absl::string_view digits = text.substr(colon + 1);
  if (!spec.uploads() || digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != absl::string_view::npos ||
      (digits.size() > 1 && digits[0] == '0') || !absl::SimpleAtoi(digits, &spec.ordinal)) {
    return invalid();
  }
  return spec;
}

}  // namespace sluice::device
