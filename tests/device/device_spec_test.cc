#include "device/device_spec.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::device {
namespace {

TEST(ParseDeviceSpecTest, ParsesEveryFormOfTheGrammar) {
  struct Case {
    const char* text;
    Platform platform;
    int ordinal;
  };
  for (const Case& c :
       {Case{"auto", Platform::kAuto, DeviceSpec::kNoOrdinal},
        Case{"cpu", Platform::kCpu, DeviceSpec::kNoOrdinal},
        Case{"cuda", Platform::kCuda, DeviceSpec::kNoOrdinal}, Case{"cuda:0", Platform::kCuda, 0},
        Case{"cuda:12", Platform::kCuda, 12}, Case{"sim", Platform::kSim, DeviceSpec::kNoOrdinal},
        Case{"sim:3", Platform::kSim, 3}}) {
    absl::StatusOr<DeviceSpec> spec = ParseDeviceSpec(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status();
    EXPECT_EQ(spec->platform, c.platform) << c.text;
    EXPECT_EQ(spec->ordinal, c.ordinal) << c.text;
    EXPECT_EQ(spec->ToString(), c.text);
  }
}

TEST(ParseDeviceSpecTest, RefusesWhatAUserWouldNotMean) {
  for (const char* text : {"", "tpu", "CUDA", "cuda:", "cuda:x", "cuda:+1", "cuda: 1", "cuda:-1",
                           "cuda:01", "sim:00", "cpu:0", "auto:1", "cuda:1234567890"}) {
    absl::StatusOr<DeviceSpec> spec = ParseDeviceSpec(text);
    ASSERT_FALSE(spec.ok()) << "'" << text << "' was accepted as " << spec->ToString();
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(spec.status().message().find("is not auto, cpu, sim[:N] or cuda[:N]"),
              std::string::npos)
        << spec.status();
  }
}

}  // namespace
}  // namespace sluice::device
