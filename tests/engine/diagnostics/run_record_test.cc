#include "engine/diagnostics/run_record.h"

#include <array>
#include <cstdint>

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

int64_t Sum(const std::array<int64_t, ComputeTimeline::kBuckets>& a) {
  int64_t s = 0;
  for (int64_t v : a) s += v;
  return s;
}

TEST(ComputeTimeline, SplitsASpanAcrossTheBucketsItCovers) {
  ComputeTimeline t;
  const int64_t ms = 1'000'000, t0 = 5'000 * ms;
  t.AddCompute(t0, t0 + ms / 2);                    // the first half of bucket 0
  t.AddCompute(t0 + 2 * ms + ms / 4, t0 + 4 * ms);  // the last 3/4 of bucket 2, all of 3
  EXPECT_EQ(t.bucket_ns, ComputeTimeline::kFirstBucketNs);
  EXPECT_EQ(t.used(), 4);
  EXPECT_EQ(t.compute_ns[0], ms / 2);
  EXPECT_EQ(t.compute_ns[1], 0);
  EXPECT_EQ(t.compute_ns[2], ms - ms / 4);
  EXPECT_EQ(t.compute_ns[3], ms);
}

TEST(ComputeTimeline, CoarsensWithoutLosingTimeWhenTheRunOutgrowsIt) {
  ComputeTimeline t;
  const int64_t t0 = 1'000'000'000, step = 3'000'000, busy = 2'000'000;
  int64_t total = 0;
  for (int i = 0; i < 5000; ++i) {  // 15 s of 2 ms steps every 3 ms, 1 ms evaluation each
    t.AddCompute(t0 + i * step, t0 + i * step + busy);
    t.AddOther(t0 + i * step + busy, t0 + i * step + busy + 500'000);
    total += busy;
  }
  EXPECT_EQ(Sum(t.compute_ns), total);
  EXPECT_EQ(Sum(t.other_ns), int64_t{5000} * 500'000);
  EXPECT_LE(t.used(), ComputeTimeline::kBuckets);
  EXPECT_GE(t.bucket_ns * ComputeTimeline::kBuckets, t.end_ns - t.origin_ns);
  EXPECT_EQ(t.bucket_ns % ComputeTimeline::kFirstBucketNs, 0);
  for (int i = 0; i + 1 < t.used(); ++i) {  // each full bucket computed 2/3 of its time
    EXPECT_NEAR(static_cast<double>(t.compute_ns[i]) / t.bucket_ns, 2.0 / 3, 0.04) << i;
  }
}

TEST(ComputeTimeline, EmptyUntilTheFirstSpan) {
  ComputeTimeline t;
  EXPECT_EQ(t.used(), 0);
  t.AddCompute(10, 10);  // empty span: counts nothing
  EXPECT_EQ(Sum(t.compute_ns), 0);
}

}  // namespace
}  // namespace sluice
