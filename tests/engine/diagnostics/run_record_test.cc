#include "engine/diagnostics/run_record.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(RunRecordFromStats, TakesDeviceSamplesAndTrainTimeFromTheConsumer) {
  PipelineStats pipeline;
  pipeline.skipped_frames = 2;
  ComputeStats compute;
  compute.device = "python consumer (batches on cpu)";
  compute.samples = 512;
  compute.steps = 2;
  compute.first_start_ns = 1'000'000'000;
  compute.last_end_ns = 3'500'000'000;
  const RunRecord r = RunRecordFromStats(pipeline, compute);
  EXPECT_EQ(r.pipeline.skipped_frames, 2u);
  EXPECT_EQ(r.compute.steps, 2u);
  EXPECT_EQ(r.device, "python consumer (batches on cpu)");
  EXPECT_EQ(r.samples, 512u);
  EXPECT_DOUBLE_EQ(r.train_seconds, 2.5);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world_size, 1);
}

TEST(RunRecordFromStats, TheSpanOpensWhenThePipelineStartedBeforeTheFirstStep) {
  // The wait for the first batch is in delivery's wait_input: the span must hold it too, or
  // that wait is a share of a span it is not in (input-bound over 100%).
  PipelineStats pipeline;
  pipeline.start_ns = 1'000'000'000;
  ComputeStats compute;
  compute.steps = 1;
  compute.first_start_ns = 1'400'000'000;
  compute.last_end_ns = 2'000'000'000;
  EXPECT_DOUBLE_EQ(RunRecordFromStats(pipeline, compute).train_seconds, 1.0);
  compute.first_start_ns = 900'000'000;  // Python: the pass asked before the pipeline started
  EXPECT_DOUBLE_EQ(RunRecordFromStats(pipeline, compute).train_seconds, 1.1);
}

TEST(RunRecordFromStats, NoStepsIsZeroTrainTime) {
  const RunRecord r = RunRecordFromStats(PipelineStats{}, ComputeStats{});
  EXPECT_EQ(r.samples, 0u);
  EXPECT_EQ(r.train_seconds, 0);
}

}  // namespace
}  // namespace sluice
