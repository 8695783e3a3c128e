#include "pipeline/resource_limits.h"

#include <string>

#include "common/limits.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"

namespace sluice {
namespace {

std::string Message(const ResourceSettings& s, SettingNames names) {
  return std::string(CheckResourceSettings(s, names).message());
}

TEST(ResourceLimitsTest, DefaultsPass) {
  EXPECT_TRUE(CheckResourceSettings(ResourceSettings{}, SettingNames::kFlags).ok());
  EXPECT_TRUE(CheckResourceSettings(ResourceSettings{}, SettingNames::kPythonArguments).ok());
}

// One bound, one message: only the setting's name differs between the CLI and Python.
TEST(ResourceLimitsTest, SameMessageUnderTheFlagAndTheArgumentName) {
  ResourceSettings s;
  s.pool_size = 1000000;
  EXPECT_EQ(Message(s, SettingNames::kFlags),
            "--pool-size: 1000000 is more than the maximum 1024 (batch buffers)");
  EXPECT_EQ(Message(s, SettingNames::kPythonArguments),
            "pool_size: 1000000 is more than the maximum 1024 (batch buffers)");
  s = ResourceSettings{};
  s.read_ahead_frames = 5000;
  EXPECT_EQ(Message(s, SettingNames::kFlags),
            "--read-ahead: 5000 is more than the maximum 1024 (frames held decompressed ahead of "
            "use)");
  EXPECT_EQ(Message(s, SettingNames::kPythonArguments),
            "read_ahead_frames: 5000 is more than the maximum 1024 (frames held decompressed "
            "ahead of use)");
}

TEST(ResourceLimitsTest, ThreadsAboveFourTimesTheHardwareAreRefused) {
  ResourceSettings s;
  s.decompress_threads = int64_t{MaxThreads()} + 1;
  const absl::Status st = CheckResourceSettings(s, SettingNames::kPythonArguments);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("decompress_threads: ", 0), 0u) << st.message();
  s.decompress_threads = MaxThreads();
  EXPECT_TRUE(CheckResourceSettings(s, SettingNames::kPythonArguments).ok());
}

TEST(ResourceLimitsTest, RingDepthAndPoolSizeLowerBounds) {
  ResourceSettings s;
  s.device_ring_depth = 1;
  EXPECT_EQ(Message(s, SettingNames::kFlags),
            "--device-ring-depth: must be >= 2 (one slot computing, one filling), got 1");
  s = ResourceSettings{};
  s.pool_size = 1;
  EXPECT_EQ(Message(s, SettingNames::kPythonArguments),
            "pool_size: must be 0 (auto) or >= 2, got 1");
  s.pool_size = -5;
  EXPECT_EQ(Message(s, SettingNames::kPythonArguments), "pool_size: must be >= 0, got -5");
}

TEST(ResourceLimitsTest, BuffersLargerThanMemoryAreRefusedBeforeAllocating) {
  RecordSpec spec;
  spec.height = 28;
  spec.width = 28;
  spec.channels = 1;
  PipelineOptions o;
  o.order.batch_size = 1u << 30;
  o.resources.pool_size = 1024;
  const absl::Status st = CheckPipelineMemory(o, spec, SettingNames::kPythonArguments);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("the batch buffers (pool_size=1024, batch_size=1073741824)"),
            std::string::npos)
      << st.message();
  o.order.batch_size = 32;
  o.resources.pool_size = 0;
  EXPECT_TRUE(CheckPipelineMemory(o, spec, SettingNames::kFlags).ok());
}

// The automatic pool: kAutoPoolSamples samples, but never more than kAutoPoolBytes of buffers
// (a 4096-sample pool of 224x224 f32 samples would be 2.4 GB), and 4 to 256 buffers.
TEST(AutoPoolSize, SamplesBoundSmallBatchesAndBytesBoundLargeOnes) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(AutoPoolSize(32, 32 * 784 * 4 + 256), 128u);      // Fashion-MNIST f32: 4096 samples
  EXPECT_EQ(AutoPoolSize(8, 8 * 16), 256u);                   // 512 by samples, at most 256
  EXPECT_EQ(AutoPoolSize(32, 32 * 224 * 224 * 3 * 4), 6u);    // 19.3 MB buffers: 128 MiB / 19.3 MB
  EXPECT_EQ(AutoPoolSize(256, 256 * 224 * 224 * 3 * 4), 4u);  // at least 4, even above the bytes
  EXPECT_EQ(AutoPoolSize(4096, 200 * kMiB), 4u);
  EXPECT_LE(uint64_t{AutoPoolSize(32, 32 * 64 * 64 * 3 * 4)} * 32 * 64 * 64 * 3 * 4,
            kAutoPoolBytes);
}

// With the epoch known: several epochs, at most a quarter of one (a pool that held whole epochs
// let the pipeline build the next one during an evaluation), but at least 2 per preprocess
// thread and 4; one epoch, at most its batches (more are never used).
TEST(AutoPoolSize, AtMostAQuarterOfAnEpochOrTheOneEpochsBatches) {
  const uint64_t fm = 32 * 784 * 4 + 256;
  EXPECT_EQ(AutoPoolSize(32, fm, 1875, 2, 10), 128u);  // Fashion-MNIST: 469 > 128, unchanged
  EXPECT_EQ(AutoPoolSize(32, fm, 43, 2, 10), 11u);     // 1,349 photos: ceil(43 / 4)
  EXPECT_EQ(AutoPoolSize(32, fm, 43, 8, 10), 16u);     // 2 per preprocess thread
  EXPECT_EQ(AutoPoolSize(32, fm, 47, 2, 1), 47u);      // one epoch: all its batches
  EXPECT_EQ(AutoPoolSize(32, fm, 5, 2, 1), 5u);        // a 151-image test split
  EXPECT_EQ(AutoPoolSize(32, fm, 2, 2, 1), 4u);        // at least 4
  EXPECT_EQ(AutoPoolSize(32, fm, 0, 2, 10), 128u);     // epoch unknown: the bound of samples
}

}  // namespace
}  // namespace sluice
