// ApplyAdvice: each setting the advice may name becomes the job option it stands for. Whether
// each piece of advice pays, measured by CheckAdvice, is advice_scenarios_test.cc.
#include "engine/job/advice_check.h"

#include "engine/job/train_job.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(ApplyAdviceTest, SetsEachSettingAndRefusesADatasetSetting) {
  TrainJobOptions o;
  ASSERT_TRUE(ApplyAdvice({AdviceSetting::kDecompressThreads, "4", ""}, &o).ok());
  EXPECT_EQ(o.pipeline.resources.decompress_threads, 4);
  ASSERT_TRUE(ApplyAdvice({AdviceSetting::kPoolSize, "256", ""}, &o).ok());
  EXPECT_EQ(o.pipeline.resources.pool_size, 256u);
  ASSERT_TRUE(ApplyAdvice({AdviceSetting::kDeviceRingDepth, "6", ""}, &o).ok());
  EXPECT_EQ(o.pipeline.resources.device_ring_depth, 6u);
  ASSERT_TRUE(ApplyAdvice({AdviceSetting::kH2DFormat, "u8", ""}, &o).ok());
  EXPECT_EQ(o.pipeline.format.h2d_format, H2DFormat::kU8);
  ASSERT_TRUE(ApplyAdvice({AdviceSetting::kBatchSize, "128", ""}, &o).ok());
  EXPECT_EQ(o.pipeline.order.batch_size, 128u);
  // The note follows the advice's own text ("store the images at 0.5 of their side  not run:
  // ..."), so it does not repeat it.
  const absl::Status data = ApplyAdvice({AdviceSetting::kImageSide, "0.5", ""}, &o);
  EXPECT_EQ(data.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(data.message()).find("store the images"), std::string::npos)
      << data.message();
  EXPECT_EQ(ApplyAdvice({AdviceSetting::kZstdLevel, "1", ""}, &o).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyAdvice({AdviceSetting::kPoolSize, "many", ""}, &o).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice
