#include "report/record/run_record.h"

#include <array>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"
#include "report/render/trace_writer.h"

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

// Opened at the span's start (the Python loader's pass), the timeline's axis starts there: the
// wait before the first step is on it as time without compute, not cut off.
TEST(ComputeTimeline, OpenedStartsAtTheOpenNotAtTheFirstStep) {
  ComputeTimeline t;
  const int64_t ms = 1'000'000, t0 = 5'000 * ms;
  t.Open(t0);
  EXPECT_TRUE(t.from_span_start);
  EXPECT_EQ(t.used(), 0);  // nothing to draw until a step ends
  // Three milliseconds of start-up, then a step.
  t.AddCompute(t0 + 3 * ms, t0 + 4 * ms);
  EXPECT_EQ(t.origin_ns, t0);
  EXPECT_EQ(t.end_ns, t0 + 4 * ms);
  EXPECT_EQ(t.used(), 4);
  EXPECT_EQ(t.compute_ns[0] + t.compute_ns[1] + t.compute_ns[2], 0);
  EXPECT_EQ(t.compute_ns[3], ms);
  t.Open(t0 + 10 * ms);  // once a span is in, the origin stays
  EXPECT_EQ(t.origin_ns, t0);
  // Coarsening keeps the origin: a long run still starts at the open.
  t.AddCompute(t0 + 999 * ms, t0 + 1000 * ms);
  EXPECT_EQ(t.origin_ns, t0);
  EXPECT_EQ(Sum(t.compute_ns), 2 * ms);
  EXPECT_GE(t.bucket_ns * ComputeTimeline::kBuckets, 1000 * ms);
}

// A copy of 10 overlapped by compute for 4 (two pieces, one counted once although two steps
// cover it), whichever stream's spans arrive first.
TEST(CopyOverlap, CountsEachOverlapOnceInEitherArrivalOrder) {
  CopyOverlap copies_first;
  copies_first.AddCopy(100, 110);
  copies_first.AddCopy(120, 125);  // no compute beside it
  copies_first.AddCompute(90, 102);
  copies_first.AddCompute(101, 103);  // overlaps the previous step: 102..103 is new
  copies_first.AddCompute(108, 112);
  EXPECT_EQ(copies_first.copy_ns(), 15);
  EXPECT_EQ(copies_first.hidden_ns(), 5);
  CopyOverlap compute_first;
  compute_first.AddCompute(90, 102);
  compute_first.AddCompute(101, 103);
  compute_first.AddCompute(108, 112);
  compute_first.AddCopy(100, 110);
  compute_first.AddCopy(120, 125);
  EXPECT_EQ(compute_first.copy_ns(), 15);
  EXPECT_EQ(compute_first.hidden_ns(), 5);
}

// The copies before an epoch's first step, while no step ran, are start-up: the first epoch's
// from its first copy, a later epoch's from the previous epoch's last step end.
TEST(CopyOverlap, CountsCopyTimeBeforeAnEpochsFirstStepAsStartUp) {
  CopyOverlap o;
  o.AddCopy(0, 10);
  o.AddCopy(10, 20);
  o.AddCompute(15, 40, /*first_of_epoch=*/true);  // 0..15 of copy time ran alone
  o.AddCopy(30, 35);                              // hidden
  o.AddCopy(45, 50);  // the next epoch's first copies: the previous step ended at 40
  o.AddCopy(50, 60);
  o.AddCompute(38, 42, /*first_of_epoch=*/false);  // the last step of the first epoch
  o.AddCompute(55, 70, /*first_of_epoch=*/true);
  EXPECT_EQ(o.copy_ns(), 40);
  EXPECT_EQ(o.hidden_ns(), 5 + 5 + 5);
  EXPECT_EQ(o.startup_ns(), 15 + 5 + 5);
}

// The online figure equals the trace's CopyHiddenShare over the same spans when the steps'
// spans arrive late, as a device backend times them (up to 40 steps behind the copies).
TEST(CopyOverlap, EqualsTheTracesCopyHiddenShareWhenStepsArriveLate) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> len(50, 400), gap(0, 300), late(0, 40);
  RunRecord run;
  std::vector<std::pair<int64_t, int64_t>> copies, steps;
  int64_t copy_t = 1000, step_t = 1200;
  for (uint64_t b = 0; b < 2000; ++b) {
    copy_t += gap(rng);
    copies.emplace_back(copy_t, copy_t + len(rng));
    copy_t = copies.back().second;
    step_t = std::max(step_t, copies.back().second) + gap(rng) / 4;
    steps.emplace_back(step_t, step_t + len(rng));
    step_t = steps.back().second;
    run.trace.push_back(TraceSpan{Stage::kH2D, b, 0, copies.back().first, copies.back().second});
    run.compute_spans.push_back({b, steps.back().first, steps.back().second});
  }
  CopyOverlap overlap;
  size_t next_step = 0;
  for (size_t b = 0; b < copies.size(); ++b) {
    overlap.AddCopy(copies[b].first, copies[b].second);
    const size_t due = b > 40 ? b - static_cast<size_t>(late(rng)) : 0;
    for (; next_step < due; ++next_step) {
      overlap.AddCompute(steps[next_step].first, steps[next_step].second);
    }
  }
  while (next_step < steps.size()) {
    overlap.AddCompute(steps[next_step].first, steps[next_step].second);
    ++next_step;
  }
  ASSERT_GT(overlap.hidden_ns(), 0);
  EXPECT_DOUBLE_EQ(static_cast<double>(overlap.hidden_ns()) / overlap.copy_ns(),
                   CopyHiddenShare(run));
}

}  // namespace
}  // namespace sluice
