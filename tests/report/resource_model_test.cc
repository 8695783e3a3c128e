// The resource model (report/model/resource_model.h) on stated costs: each bound is the
// arithmetic of its resource, the lowest binds, alternatives move the bounds they should and no
// other, and starvation is wall time beyond the CPU time.
#include "report/model/resource_model.h"

#include <vector>

#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "report/record/run_record.h"

namespace sluice {
namespace {

StageCost Cpu(Stage s, int threads, double cpu_ns, double wall_ns = 0, double blocked_ns = 0) {
  StageCost c;
  c.stage = s;
  c.threads = threads;
  c.cpu_ns = cpu_ns;
  c.wall_ns = wall_ns > 0 ? wall_ns : cpu_ns + blocked_ns;
  c.blocked_ns = blocked_ns;
  return c;
}

const Bound* FindBound(const Prediction& p, Constraint c, Stage s) {
  for (const Bound& b : p.bounds) {
    if (b.constraint == c && b.stage == s) return &b;
  }
  return nullptr;
}

// The planted case of docs/bottleneck.md: decompress spins 30 us per sample on 2 threads, the
// CPU step costs 5 us per sample on 2 threads, 2 cores. Each stage alone could go faster than
// the cores allow for both: the shared CPU binds, and decompress is its largest consumer.
TEST(ResourceModel, ACpuHungryStageBindsTheSharedCpuAndIsNamedAsItsLargestConsumer) {
  ResourceModel m({Cpu(Stage::kDecompress, 2, 30'000, 60'000), Cpu(Stage::kCompute, 2, 5'000)}, 2);
  const Prediction p = m.Predict(m.Current());
  EXPECT_EQ(p.binding.constraint, Constraint::kSharedCpu);
  EXPECT_EQ(p.binding.stage, Stage::kDecompress);
  EXPECT_NEAR(p.samples_per_s, 2e9 / 35'000, 1e-6);
  ASSERT_NE(FindBound(p, Constraint::kStage, Stage::kDecompress), nullptr);
  EXPECT_NEAR(FindBound(p, Constraint::kStage, Stage::kDecompress)->samples_per_s, 2e9 / 30'000,
              1e-6);
  EXPECT_NEAR(FindBound(p, Constraint::kStage, Stage::kCompute)->samples_per_s, 2e9 / 5'000, 1e-6);
  // 66.7 k is more than 15% above 57.1 k: not a close call.
  ASSERT_EQ(p.close.size(), 1u);
  EXPECT_NEAR(m.CpuSharePct(Stage::kDecompress), 100.0 * 30 / 35, 1e-9);
  EXPECT_NEAR(m.StarvedPct(Stage::kDecompress), 50.0, 1e-9);
  EXPECT_EQ(m.StarvedPct(Stage::kCompute), 0.0);

  // More decompress threads move its own bound, not the cores: the rate stays.
  Allocation more = m.Current();
  more.threads[Stage::kDecompress] = 4;
  EXPECT_NEAR(m.Predict(more).samples_per_s, p.samples_per_s, 1e-6);
  // Freeing decompress leaves compute's own bound and the cores' (now 2 / 5 us): equal, a close
  // call between them.
  Allocation freed = m.Current();
  freed.free_stage = Stage::kDecompress;
  const Prediction f = m.Predict(freed);
  EXPECT_NEAR(f.samples_per_s, 2e9 / 5'000, 1e-6);
  EXPECT_EQ(f.close.size(), 2u);
  EXPECT_EQ(FindBound(f, Constraint::kStage, Stage::kDecompress), nullptr);
  // Twice the cores: the shared bound doubles, decompress's own (2 threads) then binds.
  Allocation four = m.Current();
  four.cores = 4;
  const Prediction q = m.Predict(four);
  EXPECT_EQ(q.binding.constraint, Constraint::kStage);
  EXPECT_EQ(q.binding.stage, Stage::kDecompress);
}

// A part of a stage's cost freed (decode inside preprocess): the stage's own bound and the
// cores' move by its share.
TEST(ResourceModel, ScalingAStagesCostMovesItsBoundsByTheFactor) {
  ResourceModel m({Cpu(Stage::kPreprocess, 2, 40'000), Cpu(Stage::kCompute, 2, 10'000)}, 2);
  Allocation a = m.Current();
  a.cost_scale[Stage::kPreprocess] = 0.25;  // decode was 75% of preprocess
  const Prediction p = m.Predict(a);
  EXPECT_NEAR(FindBound(p, Constraint::kStage, Stage::kPreprocess)->samples_per_s, 2e9 / 10'000,
              1e-6);
  EXPECT_NEAR(FindBound(p, Constraint::kSharedCpu, Stage::kPreprocess)->samples_per_s, 2e9 / 20'000,
              1e-6);
  EXPECT_NEAR(p.samples_per_s, 2e9 / 20'000, 1e-6);
  // Other processes holding half a core leave 1.5 to the run.
  Allocation busy = m.Current();
  busy.cores = 1.5;
  EXPECT_NEAR(m.Predict(busy).samples_per_s, 1.5e9 / 50'000, 1e-6);
}

// A stage measured alone (CPU compute's ceiling) is bound by that rate, not by its threads over
// the CPU time it got while starved; other thread counts fall back to the CPU time.
TEST(ResourceModel, AStageMeasuredAloneIsBoundByThatRate) {
  StageCost compute = Cpu(Stage::kCompute, 2, 8'000);
  compute.alone_samples_per_s = 160'000;
  ResourceModel m({Cpu(Stage::kDecompress, 2, 1'000), compute}, 2);
  EXPECT_NEAR(FindBound(m.Predict(m.Current()), Constraint::kStage, Stage::kCompute)->samples_per_s,
              160'000, 1e-6);
  // Its CPU time alone is its threads busy throughout: 2 / 160 k = 12.5 us per sample, more
  // than the 8 us it got while starved.
  EXPECT_NEAR(
      FindBound(m.Predict(m.Current()), Constraint::kSharedCpu, Stage::kCompute)->samples_per_s,
      2e9 / (12'500 + 1'000), 1e-6);
  Allocation one = m.Current();
  one.threads[Stage::kCompute] = 1;
  // On one thread, the CPU time it was measured with; decompress's threads, runnable 1 us per
  // sample each, take a core from it now and then (a fraction of a percent here).
  const double one_bound =
      FindBound(m.Predict(one), Constraint::kStage, Stage::kCompute)->samples_per_s;
  EXPECT_LT(one_bound, 1e9 / 8'000);
  EXPECT_GT(one_bound, 0.99e9 / 8'000);
}

// A stage on one thread that does not fill the cores on average can still be held below its
// CPU bound: while the CPU step runs on both cores, it shares them three ways (docs/
// bottleneck.md, "The resource model"). Preprocess always wants its core at its bound; the
// step's 2 threads then get 2/3 of a core each, so they run 0.75 x rate x 8 us of the time,
// and preprocess loses a third of a core for that long: rate x 20 us = 1 - 0.25 x rate x 8 us.
TEST(ResourceModel, AStageSharingItsCoreWithABurstOfComputeIsSlowedByIt) {
  StageCost compute = Cpu(Stage::kCompute, 2, 8'000);
  compute.gang = true;
  ResourceModel m({Cpu(Stage::kPreprocess, 1, 20'000), compute}, 2);
  const Prediction p = m.Predict(m.Current());
  EXPECT_EQ(p.binding.constraint, Constraint::kStage);
  EXPECT_EQ(p.binding.stage, Stage::kPreprocess);
  EXPECT_NEAR(p.samples_per_s, 1e9 / (20'000 + 0.25 * 8'000), 1e9 / 22'000 * 0.005);
  // The cores are far from full on average (28 us of CPU per sample on 2 cores: 71.4 k).
  EXPECT_NEAR(FindBound(p, Constraint::kSharedCpu, Stage::kPreprocess)->samples_per_s, 2e9 / 28'000,
              1e-6);
  // On 3 cores nothing has to share: preprocess's bound is its CPU time alone.
  Allocation three = m.Current();
  three.cores = 3;
  EXPECT_NEAR(m.Predict(three).samples_per_s, 1e9 / 20'000, 1e-6);
  // A second preprocess thread lifts it to the cores' bound.
  Allocation two = m.Current();
  two.threads[Stage::kPreprocess] = 2;
  EXPECT_EQ(m.Predict(two).binding.constraint, Constraint::kSharedCpu);
}

// A reader that blocks (I/O, a sleep) is held by its own thread: a second thread doubles its
// bound, because blocking needs no core.
TEST(ResourceModel, BlockingStageGainsFromThreadsBeyondTheCores) {
  ResourceModel m({Cpu(Stage::kRead, 1, 1'000, 0, 99'000), Cpu(Stage::kCompute, 1, 2'000)}, 1);
  const Prediction p = m.Predict(m.Current());
  EXPECT_EQ(p.binding.constraint, Constraint::kStage);
  EXPECT_EQ(p.binding.stage, Stage::kRead);
  // Within 0.1%: the step's 2 us per sample takes the one core from the reader's 1 us now and
  // then.
  EXPECT_NEAR(p.samples_per_s, 1e9 / 100'000, 1e9 / 100'000 * 1e-3);
  Allocation a = m.Current();
  a.threads[Stage::kRead] = 4;
  EXPECT_NEAR(m.Predict(a).samples_per_s, 4e9 / 100'000, 4e9 / 100'000 * 1e-3);
  EXPECT_EQ(m.StarvedPct(Stage::kRead), 0.0);
}

// The device half: the link and the device are resources of their own, and the host's
// enqueue is a stage on one thread.
TEST(ResourceModel, LinkAndDeviceAreResourcesOfTheirOwn) {
  StageCost h2d;
  h2d.stage = Stage::kH2D;
  h2d.device_ns = 10'000;
  StageCost compute = Cpu(Stage::kCompute, 1, 1'000);
  compute.device_ns = 5'000;
  ResourceModel m({Cpu(Stage::kPreprocess, 2, 4'000), h2d, compute}, 2);
  const Prediction p = m.Predict(m.Current());
  EXPECT_EQ(p.binding.constraint, Constraint::kLink);
  EXPECT_EQ(p.binding.stage, Stage::kH2D);
  EXPECT_NEAR(p.samples_per_s, 1e5, 1e-6);
  EXPECT_NEAR(FindBound(p, Constraint::kDevice, Stage::kCompute)->samples_per_s, 2e5, 1e-6);
  EXPECT_NEAR(FindBound(p, Constraint::kSharedCpu, Stage::kPreprocess)->samples_per_s, 2e9 / 5'000,
              1e-6);
  EXPECT_STREQ(ConstraintName(p.binding.constraint), "link");
}

// From a report's rows: the reader's wall time beyond its CPU time is blocking, the others'
// is starvation; decode and the pinned wait are not stages of the model; compute on a device
// costs the host its enqueue.
TEST(ResourceModel, BuiltFromRows) {
  auto row = [](Stage s, int threads, uint64_t samples, int64_t busy_ns, double cpu_per_sample) {
    StageRow r;
    r.stage = s;
    r.present = true;
    r.concurrency = threads;
    r.samples = samples;
    r.busy_ns = busy_ns;
    r.cpu_ns_per_sample = cpu_per_sample;
    return r;
  };
  std::vector<StageRow> rows = {
      row(Stage::kRead, 1, 1000, 50'000'000, 10'000),        // 50 us wall, 10 us CPU
      row(Stage::kDecompress, 2, 1000, 40'000'000, 20'000),  // 40 us wall, 20 us CPU
      row(Stage::kDecode, 2, 1000, 1'000'000, 1'000),
      row(Stage::kPinnedWait, 1, 1000, 9'000'000, 0), row(Stage::kCompute, 1, 1000, 8'000'000, 0)};
  ComputeStats cs;
  cs.on_device = true;
  cs.enqueue_ns = 2'000'000;
  ResourceModel m = BuildResourceModel(rows, cs, 2);
  ASSERT_EQ(m.stages().size(), 3u);
  {
    // 40% of decompress's samples were built while the trainer was outside the span: the span
    // holds 60% of its cost per sample, and its starvation share is unchanged.
    std::vector<StageRow> ahead = rows;
    ahead[1].outside_span_pct = 40;
    ResourceModel a = BuildResourceModel(ahead, cs, 2);
    EXPECT_NEAR(a.Find(Stage::kDecompress)->cpu_ns, 0.6 * 20'000, 1e-6);
    EXPECT_NEAR(a.Find(Stage::kDecompress)->wall_ns, 0.6 * 40'000, 1e-6);
    EXPECT_NEAR(a.StarvedPct(Stage::kDecompress), 50.0, 1e-9);
    EXPECT_NEAR(a.Find(Stage::kRead)->cpu_ns, 10'000, 1e-9);
  }
  EXPECT_NEAR(m.Find(Stage::kRead)->blocked_ns, 40'000, 1e-9);
  EXPECT_EQ(m.Find(Stage::kDecompress)->blocked_ns, 0.0);
  EXPECT_NEAR(m.StarvedPct(Stage::kDecompress), 50.0, 1e-9);
  EXPECT_EQ(m.Find(Stage::kDecode), nullptr);
  EXPECT_EQ(m.Find(Stage::kPinnedWait), nullptr);
  EXPECT_NEAR(m.Find(Stage::kCompute)->device_ns, 8'000, 1e-9);
  EXPECT_NEAR(m.Find(Stage::kCompute)->cpu_ns, 2'000, 1e-9);
  EXPECT_EQ(m.Find(Stage::kCompute)->threads, 1);

  // The process spent 46 us of CPU per sample: 30 us in read and decompress, so 16 us is the
  // device's own work on host threads (the simulated device's CPU team), 2 cores' worth of its
  // 8 us steps: compute's host CPU time, wanting 2 cores together.
  ResourceModel sim = BuildResourceModel(rows, cs, 2, true, /*process_cpu_ns_per_sample=*/46'000);
  EXPECT_NEAR(sim.Find(Stage::kCompute)->cpu_ns, 16'000, 1e-9);
  EXPECT_EQ(sim.Find(Stage::kCompute)->threads, 2);
  EXPECT_TRUE(sim.Find(Stage::kCompute)->gang);
  // More than the cores could do during its steps is time, not work per sample (a team
  // spinning between steps): held to the cores x the device's time.
  ResourceModel idle = BuildResourceModel(rows, cs, 2, true, 200'000);
  EXPECT_NEAR(idle.Find(Stage::kCompute)->cpu_ns, 2 * 8'000, 1e-9);
  // Less than the enqueue: the enqueue stands.
  ResourceModel cuda = BuildResourceModel(rows, cs, 2, true, 31'000);
  EXPECT_NEAR(cuda.Find(Stage::kCompute)->cpu_ns, 2'000, 1e-9);
  EXPECT_FALSE(cuda.Find(Stage::kCompute)->gang);
  // 11 us of host work per 8 us of device time: 2 threads, so that its own bound (2 / 11 us)
  // stays above the device's (1 / 8 us); 1 thread would bind the step at 1 / 11 us.
  ResourceModel part = BuildResourceModel(rows, cs, 2, true, 41'000);
  EXPECT_EQ(part.Find(Stage::kCompute)->threads, 2);
  const Prediction pp = part.Predict(part.Current());
  EXPECT_GE(FindBound(pp, Constraint::kStage, Stage::kCompute)->samples_per_s, 1e9 / 8'000);
}

// CPU compute's own bound is its ceiling (the step alone on idle cores) when the run did not
// beat it; a ceiling measured on a busy machine is not that, and the bound is then its
// threads over its CPU time.
TEST(ResourceModel, CpuComputeTakesItsCeilingOnlyFromAQuietMeasurement) {
  StageRow compute;
  compute.stage = Stage::kCompute;
  compute.present = true;
  compute.concurrency = 2;
  compute.samples = 1000;
  compute.busy_ns = 10'000'000;        // 10 us per sample on each of 2 threads
  compute.cpu_ns_per_sample = 10'000;  // 2 threads x 10 us wall, half of it on a core
  compute.capacity_samples_per_s = 200'000;
  compute.ceiling_samples_per_s = 250'000;
  const std::vector<StageRow> rows = {compute};
  const ComputeStats cs;
  ResourceModel quiet = BuildResourceModel(rows, cs, 2, /*quiet_ceilings=*/true);
  ASSERT_TRUE(quiet.Find(Stage::kCompute)->alone_samples_per_s.has_value());
  EXPECT_NEAR(*quiet.Find(Stage::kCompute)->alone_samples_per_s, 250'000, 1e-9);
  ResourceModel busy = BuildResourceModel(rows, cs, 2, /*quiet_ceilings=*/false);
  EXPECT_FALSE(busy.Find(Stage::kCompute)->alone_samples_per_s.has_value());
  // 2 threads on 2 cores over 10 us of CPU per sample.
  EXPECT_NEAR(busy.Predict(busy.Current()).samples_per_s, 200'000, 1e-6);
}

// The Python consumer's step is foreign code: its thread's CPU clock misses the threads the
// step runs itself (torch's intra-op team). The process's CPU time no stage accounts for is
// then the step's when it is more, up to the cores for the step's wall time, as a team.
TEST(ResourceModel, AForeignStepTakesTheProcessCpuNoStageAccountsFor) {
  StageRow prep;
  prep.stage = Stage::kPreprocess;
  prep.present = true;
  prep.concurrency = 2;
  prep.samples = 1000;
  prep.busy_ns = 100'000'000;  // 100 us per sample
  prep.cpu_ns_per_sample = 100'000;
  StageRow compute;
  compute.stage = Stage::kCompute;
  compute.present = true;
  compute.concurrency = 1;
  compute.samples = 1000;
  compute.busy_ns = 50'000'000;        // 50 us of wall per sample
  compute.cpu_ns_per_sample = 20'000;  // its thread: 20 us
  const std::vector<StageRow> rows = {prep, compute};
  ComputeStats cs;
  cs.samples = 1000;
  cs.busy_ns = 50'000'000;
  cs.cpu_ns = 20'000'000;
  // Not foreign (sluice's CPU backend, whose team clocks are read): the rows stand.
  ResourceModel own = BuildResourceModel(rows, cs, 2, true, /*process_cpu_ns_per_sample=*/180'000);
  EXPECT_NEAR(own.Find(Stage::kCompute)->cpu_ns, 20'000, 1e-9);
  cs.foreign_step = true;
  // 180 us per sample in the process, 100 in preprocess: the step's 80 us over 50 us of wall
  // is a team of 2.
  ResourceModel team = BuildResourceModel(rows, cs, 2, true, 180'000);
  EXPECT_NEAR(team.Find(Stage::kCompute)->cpu_ns, 80'000, 1e-9);
  EXPECT_EQ(team.Find(Stage::kCompute)->threads, 2);
  EXPECT_TRUE(team.Find(Stage::kCompute)->gang);
  // At most the cores for its wall time (2 x 50 us).
  ResourceModel most = BuildResourceModel(rows, cs, 2, true, 400'000);
  EXPECT_NEAR(most.Find(Stage::kCompute)->cpu_ns, 100'000, 1e-9);
  // Less than its thread's own time: the thread's stands.
  ResourceModel less = BuildResourceModel(rows, cs, 2, true, 110'000);
  EXPECT_NEAR(less.Find(Stage::kCompute)->cpu_ns, 20'000, 1e-9);
  EXPECT_EQ(less.Find(Stage::kCompute)->threads, 1);
}

// The cores bind and two stages use them nearly alike: the stage named for the cores is so by a
// hair, and identical runs may name either (a quarter-side photo folder named decode and compute
// in turn). A close call between them; none when one clearly leads.
TEST(ResourceModel, TwoNearlyEqualUsersOfBoundCoresAreACloseCall) {
  ResourceModel near({Cpu(Stage::kPreprocess, 2, 10'000), Cpu(Stage::kCompute, 2, 9'000)}, 2);
  const Prediction p = near.Predict(near.Current());
  ASSERT_EQ(p.binding.constraint, Constraint::kSharedCpu);
  EXPECT_EQ(p.binding.stage, Stage::kPreprocess);
  ASSERT_EQ(p.close.size(), 2u);
  EXPECT_EQ(p.close[1].constraint, Constraint::kSharedCpu);
  EXPECT_EQ(p.close[1].stage, Stage::kCompute);
  ResourceModel apart({Cpu(Stage::kPreprocess, 2, 10'000), Cpu(Stage::kCompute, 2, 8'000)}, 2);
  const Prediction q = apart.Predict(apart.Current());
  ASSERT_EQ(q.binding.constraint, Constraint::kSharedCpu);
  EXPECT_EQ(q.close.size(), 1u);
}

}  // namespace
}  // namespace sluice
