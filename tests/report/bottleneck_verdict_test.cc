// The bottleneck report's verdict on single-process runs: which stage limits the run and the
// throughput predicted from it, each stage's capacity, and the thresholds of the verdict
// classes (input-bound, CPU-bound, compute-bound, launch-bound, starved on the pinned pool).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "report/stages.h"
#include "tests/report/synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::kSamples;
using synthetic_run::MakeRun;
using synthetic_run::Synth;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(BottleneckReportTest, SlowestStageIsNamedAndPredicted) {
  struct Case {
    Stage stage;
    Synth synth;
    double ns_per_sample;  // the limiting stage's busy / concurrency per sample
  };
  Synth read;
  read.read_ns = 2000;
  Synth decompress;
  decompress.decompress_ns = 3000;
  Synth preprocess;
  preprocess.preprocess_ns = 2400;
  Synth compute;
  compute.compute_ns = 900;
  Synth h2d;
  h2d.cuda = true;
  h2d.compute_ns = 300;
  h2d.h2d_ns = 1000;
  const Case cases[] = {{Stage::kRead, read, 2000},
                        {Stage::kDecompress, decompress, 1500},
                        {Stage::kPreprocess, preprocess, 1200},
                        {Stage::kCompute, compute, 900},
                        {Stage::kH2D, h2d, 1000}};
  for (const Case& c : cases) {
    SCOPED_TRACE(StageName(c.stage));
    BottleneckReport rep = AnalyzeRun(MakeRun(c.synth), nullptr, /*cores=*/16);
    EXPECT_EQ(rep.limiting_stage, c.stage);
    EXPECT_THAT(rep.sentence, HasSubstr(absl::StrCat(StageName(c.stage), " is the limit")));
    EXPECT_NEAR(rep.predicted_samples_per_s, 1e9 / c.ns_per_sample, 1e-6 * 1e9 / c.ns_per_sample);
    EXPECT_NEAR(rep.measured_samples_per_s, 1e9 / (1.02 * c.ns_per_sample), 1.0);
    if (c.stage == Stage::kCompute) {
      EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound);
    } else {
      EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
      // The limiting stage gets the largest share of the consumer's wait.
      for (const StageRow& r : rep.stages) {
        if (r.stage != c.stage) {
          EXPECT_LE(r.attributed_wait_pct, rep.row(c.stage).attributed_wait_pct);
        }
      }
    }
  }
}

TEST(BottleneckReportTest, CapacityIsSamplesOverBusyPerThread) {
  Synth s;
  s.decompress_ns = 3000;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 16);
  const StageRow& d = rep.row(Stage::kDecompress);
  ASSERT_TRUE(d.capacity_samples_per_s.has_value());
  EXPECT_DOUBLE_EQ(*d.capacity_samples_per_s, kSamples * 2 * 1e9 / (3000.0 * kSamples));
  EXPECT_NEAR(d.busy_pct + d.wait_input_pct + d.wait_output_pct, 100.0, 1e-6);
  EXPECT_FALSE(rep.row(Stage::kPinnedWait).capacity_samples_per_s.has_value());
  EXPECT_FALSE(rep.row(Stage::kH2D).present);  // CPU run: no copy stage
}

TEST(BottleneckReportTest, InputBoundThresholds) {
  struct Case {
    double wait_pct;
    VerdictClass verdict;
  };
  for (const Case& c :
       {Case{25, VerdictClass::kInputBound}, Case{21, VerdictClass::kInputBound},
        Case{12, VerdictClass::kPartlyInputBound}, Case{5.5, VerdictClass::kPartlyInputBound},
        Case{4, VerdictClass::kComputeBound}, Case{0, VerdictClass::kComputeBound}}) {
    SCOPED_TRACE(c.wait_pct);
    Synth s;
    s.decompress_ns = 1200;
    s.wait_pct = c.wait_pct;
    BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 16);
    EXPECT_NEAR(rep.input_bound_pct, c.wait_pct, 1e-6);
    EXPECT_EQ(rep.verdict, c.verdict);
    EXPECT_THAT(rep.sentence, HasSubstr(VerdictClassName(c.verdict)));
  }
}

TEST(BottleneckReportTest, CpuBoundWhenStagesSaturateCores) {
  // Every stage alone could do more than the run did; together they need 2.9 ns of CPU per
  // sample on 2 cores: the run is limited by the cores.
  Synth s;
  s.read_ns = 300;
  s.decompress_ns = 1000;
  s.preprocess_ns = 1000;
  s.compute_ns = 600;
  s.train_ns_per_sample = 2900.0 / 2 / 1.02;  // what 2 saturated cores allow
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  EXPECT_EQ(rep.verdict, VerdictClass::kCpuBound);
  EXPECT_TRUE(rep.cpu_saturated);
  EXPECT_NEAR(rep.cpu_limit_samples_per_s, 2e9 / 2900, 1e-3);
  EXPECT_NEAR(rep.predicted_samples_per_s, 2e9 / 2900, 1e-3);
  EXPECT_LT(rep.predicted_samples_per_s, rep.capacity_limit_samples_per_s);
  EXPECT_THAT(rep.sentence, HasSubstr("cpu-bound"));
  EXPECT_THAT(rep.sentence, HasSubstr("the 2 cores bind"));
  EXPECT_EQ(rep.model.binding.constraint, Constraint::kSharedCpu);
  // The same run on 16 cores is not CPU-bound.
  EXPECT_NE(AnalyzeRun(MakeRun(s), nullptr, 16).verdict, VerdictClass::kCpuBound);
}

TEST(BottleneckReportTest, ComputeSplitAcrossThreadsCountsTheCpuOfEachThread) {
  // Compute's busy is the wall time of its steps; split across 2 threads it uses 2 cores while
  // it runs: 400 ns of wall time per sample is 800 ns of CPU. With the graph stages' 700 ns,
  // 2 cores allow 2e9 / 1500 samples/s, and the run that did that saturated them.
  Synth s;
  s.read_ns = 100;
  s.decompress_ns = 300;
  s.preprocess_ns = 300;
  s.compute_ns = 400;
  s.compute_threads = 2;
  s.train_ns_per_sample = 1500.0 / 2 / 1.02;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  const StageRow& compute = rep.row(Stage::kCompute);
  EXPECT_EQ(compute.concurrency, 2);
  EXPECT_NEAR(compute.cpu_ns_per_sample, 800, 1e-6);
  EXPECT_NEAR(*compute.capacity_samples_per_s, 1e9 / 400, 1e-3);  // wall: the threads together
  EXPECT_NEAR(rep.cpu_limit_samples_per_s, 2e9 / 1500, 1e-3);
  EXPECT_NEAR(rep.cpu_threads_busy, 2.0, 1e-9);
  EXPECT_TRUE(rep.cpu_saturated);
  EXPECT_NEAR(rep.predicted_samples_per_s, 2e9 / 1500, 1e-3);
  // Compute the limit: the verdict says how many threads it ran on.
  Synth c;
  c.compute_ns = 1000;
  c.compute_threads = 2;
  rep = AnalyzeRun(MakeRun(c), nullptr, /*cores=*/8);
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(rep.sentence, HasSubstr("compute is the limit at"));
  EXPECT_THAT(rep.sentence, HasSubstr("on 2 threads"));
  // (100 + 200 + 200 + 2 x 1000) ns of CPU per 1020 ns of training.
  EXPECT_THAT(rep.ToText(), HasSubstr("used 2.45 cores"));
}

TEST(BottleneckReportTest, ComputeCpuIsWhatItsThreadsMeasuredWhenATeamThreadWasNotScheduled) {
  // Two compute threads, 400 ns of wall time per sample, but the team thread ran for only half
  // of each step (the caller did the rest): the threads' CPU clocks measured 600 ns per sample,
  // not 800. Compute then used 600 / 1020 cores' worth; the cores are not saturated and the CPU
  // formula allows 2e9 / (700 + 600) samples/s.
  Synth s;
  s.read_ns = 100;
  s.decompress_ns = 300;
  s.preprocess_ns = 300;
  s.compute_ns = 400;
  s.compute_threads = 2;
  s.compute_cpu_ns = 600;
  s.train_ns_per_sample = 1020;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  const StageRow& compute = rep.row(Stage::kCompute);
  const double train_ns_per_sample = rep.train_seconds * 1e9 / rep.samples;
  EXPECT_NEAR(compute.cpu_ns_per_sample, 600, 1e-6);
  EXPECT_NEAR(compute.cores_busy, 600 / train_ns_per_sample, 1e-9);
  EXPECT_NEAR(rep.row(Stage::kDecompress).cores_busy, 300 / train_ns_per_sample, 1e-9);
  EXPECT_NEAR(rep.cpu_limit_samples_per_s, 2e9 / 1300, 1e-3);
  EXPECT_NEAR(rep.cpu_threads_busy, 1300 / train_ns_per_sample, 1e-9);
  EXPECT_FALSE(rep.cpu_saturated);
  EXPECT_EQ(rep.ToJson()["stages"][static_cast<int>(ReportRow(Stage::kCompute))]["cores_busy"],
            compute.cores_busy);
  // Compute the limit: the verdict names its threads and the cores they kept busy.
  Synth c;
  c.compute_ns = 1000;
  c.compute_threads = 2;
  c.compute_cpu_ns = 1700;
  rep = AnalyzeRun(MakeRun(c), nullptr, /*cores=*/8);
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(rep.sentence, HasSubstr("on 2 threads (1.7 cores busy)"));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("other processes")));
  // The same run whose two threads ran on 0.8 cores while computing: the cores went elsewhere.
  c.compute_cpu_ns = 800;
  rep = AnalyzeRun(MakeRun(c), nullptr, /*cores=*/8);
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(rep.sentence, HasSubstr("while computing, its 2 threads ran on 0.8 cores on "
                                      "average: other processes may hold the cores"));
  // Measured: this process kept 7.5 of the 8 cores busy (its timed stages 1.3) and other
  // processes none, so the cores went to this process's threads outside the stages it times,
  // not to other processes (a batch of 1 on 2 idle cores: 2.0 busy, 0.6 of it outside).
  RunRecord own = MakeRun(c);
  own.other_cores_busy = 0.0;
  own.process_cores_busy = 7.5;
  rep = AnalyzeRun(own, nullptr, /*cores=*/8);
  EXPECT_THAT(rep.sentence, HasSubstr("ran on 0.8 cores on average: this process kept 7.5 of the "
                                      "8 cores busy, 6.2 of them outside the stages it times"))
      << rep.sentence;
  EXPECT_THAT(rep.sentence, HasSubstr("(between the stages: hand-offs, threads waiting for work)"));
  EXPECT_THAT(rep.sentence, Not(HasSubstr("other processes")));
  // Measured, and neither this process nor others filled the cores: the threads waited.
  own.process_cores_busy = 1.0;
  rep = AnalyzeRun(own, nullptr, /*cores=*/8);
  EXPECT_THAT(rep.sentence, HasSubstr("the cores were not full (this process 1.0, other "
                                      "processes 0.0 of 8): its threads waited off the cores"))
      << rep.sentence;
  // Not when this run's own stages saturate the cores (that clause names them instead).
  rep = AnalyzeRun(MakeRun(c), nullptr, /*cores=*/1);
  EXPECT_THAT(rep.sentence, Not(HasSubstr("other processes")));
  // On 2 cores, this run's pipeline threads kept 0.8 of them busy while compute's 2 threads
  // ran on 0.9: the pipeline is named, not other processes.
  Synth p;
  p.compute_ns = 1000;
  p.compute_threads = 2;
  p.compute_cpu_ns = 900;
  p.preprocess_ns = 600;
  p.train_ns_per_sample = 1100;
  rep = AnalyzeRun(MakeRun(p), nullptr, /*cores=*/2);
  EXPECT_FALSE(rep.cpu_saturated);
  if (rep.verdict == VerdictClass::kComputeBound) {
    EXPECT_THAT(rep.sentence, HasSubstr("ran on 0.9 cores on average: this run's pipeline "
                                        "threads kept 0.8 cores busy meanwhile"));
    EXPECT_THAT(rep.sentence, Not(HasSubstr("other processes")));
  }
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound) << rep.sentence;
  // Other processes measured holding 1.1 cores: they are named.
  RunRecord busy = MakeRun(c);
  busy.other_cores_busy = 6.5;
  rep = AnalyzeRun(busy, nullptr, /*cores=*/8);
  EXPECT_THAT(rep.sentence, HasSubstr("other processes kept 6.5 of the 8 cores busy meanwhile"))
      << rep.sentence;
}

TEST(BottleneckReportTest, ComputeHoldingTheSaturatedCoresIsComputeBoundDespiteAShortWait) {
  // Compute on 2 threads takes 1.6 of the 2 saturated cores; the pipeline's 0.4 cores of work
  // get a core late, so compute waits 8% of the time. That wait is CPU contention caused by
  // compute, not a slow pipeline: compute is the limit, and fewer pipeline threads would not
  // help the pipeline (it is fast) but leave compute more CPU.
  Synth s;
  s.read_ns = 100;
  s.decompress_ns = 300;
  s.preprocess_ns = 300;
  s.compute_ns = 900;
  s.compute_threads = 2;
  s.compute_cpu_ns = 1600;
  s.train_ns_per_sample = 2300.0 / 2 / 1.02;
  s.wait_pct = 8;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  ASSERT_TRUE(rep.cpu_saturated);
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound) << rep.sentence;
  EXPECT_EQ(rep.limiting_stage, Stage::kCompute);
  EXPECT_THAT(rep.sentence, HasSubstr("compute waited 8% of training time"));
  EXPECT_THAT(rep.sentence, HasSubstr("the 2 cores are saturated"));
  // When the pipeline holds most of the CPU, the same wait names the pipeline's stage.
  s.compute_ns = 300;
  s.compute_cpu_ns = 500;
  s.decompress_ns = 1200;
  s.train_ns_per_sample = 2100.0 / 2 / 1.02;
  rep = AnalyzeRun(MakeRun(s), nullptr, /*cores=*/2);
  ASSERT_TRUE(rep.cpu_saturated);
  EXPECT_EQ(rep.verdict, VerdictClass::kCpuBound) << rep.sentence;
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
}

TEST(BottleneckReportTest, StarvedThreadsAreNotWorkAndThePredictionIsNotTheMeasurement) {
  // A delayed decompress spinning on both cores while compute also runs: its wall busy time
  // (4,000 ns per sample over 2 threads) is twice its CPU time, the rest waiting for a core.
  // The prediction comes from CPU time, so it is a prediction: near the measured rate, not
  // equal to it by construction, and decompress is named as the cores' largest consumer.
  Synth s;
  s.read_ns = 100;
  s.decompress_ns = 4000;
  s.decompress_cpu_ns = 2000;
  s.preprocess_ns = 1000;
  s.compute_ns = 1000;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 2);
  EXPECT_EQ(rep.verdict, VerdictClass::kCpuBound) << rep.sentence;
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  EXPECT_THAT(rep.sentence, HasSubstr("decompress is the limit"));
  EXPECT_THAT(rep.sentence, HasSubstr("decompress takes 49% of the CPU time"));
  EXPECT_EQ(rep.model.binding.constraint, Constraint::kSharedCpu);
  EXPECT_NEAR(rep.predicted_samples_per_s, 2e9 / (100 + 2000 + 1000 + 1000), 1e-6);
  EXPECT_NE(rep.predicted_samples_per_s, rep.measured_samples_per_s);
  bool found = false;
  for (const auto& [stage, pct] : rep.starved_pct) {
    if (stage != Stage::kDecompress) continue;
    found = true;
    EXPECT_NEAR(pct, 50.0, 1e-9);
  }
  EXPECT_TRUE(found);
}

// On a device, launch-bound means the compute stream idled while the host, which never waited
// for data, took longer to enqueue a step than the device to run it.
TEST(BottleneckReportTest, LaunchBoundOnADeviceOnlyWhenEnqueueIsTheLimit) {
  Synth s;
  s.cuda = true;
  s.compute_ns = 200;  // device time per sample
  s.enqueue_ns = 800;  // host enqueue per sample
  s.h2d_ns = 100;
  s.wait_pct = 60;      // the compute stream idled
  s.host_wait_pct = 1;  // the host never waited for a batch
  s.train_ns_per_sample = 820;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 16);
  EXPECT_EQ(rep.verdict, VerdictClass::kLaunchBound) << rep.sentence;
  EXPECT_THAT(rep.sentence, HasSubstr("launch-bound"));
  // A busy device is compute-bound, however long the host spends in TrainStep.
  s.wait_pct = 1;
  s.compute_ns = 800;
  EXPECT_EQ(AnalyzeRun(MakeRun(s), nullptr, 16).verdict, VerdictClass::kComputeBound);
  // Fast enqueue: the idle device is not blamed on launches.
  s.wait_pct = 60;
  s.compute_ns = 200;
  s.enqueue_ns = 50;
  EXPECT_NE(AnalyzeRun(MakeRun(s), nullptr, 16).verdict, VerdictClass::kLaunchBound);
  // The host waited for data too: the pipeline, not launches.
  s.enqueue_ns = 800;
  s.host_wait_pct = 50;
  EXPECT_NE(AnalyzeRun(MakeRun(s), nullptr, 16).verdict, VerdictClass::kLaunchBound);
}

TEST(BottleneckReportTest, StarvedWithFullPoolAndNoSlowStageIsComputeBoundWithHandOffs) {
  // Every stage is faster than compute, yet compute waited 30% with all 4 buffers in use: the
  // waits are hand-offs, compute (the slowest stage) is the limit, and the full pool is said.
  Synth s;
  s.compute_ns = 900;
  s.wait_pct = 30;
  s.pinned_wait_pct = 500;  // summed over waiting batches: far above 100%
  RunRecord run = MakeRun(s);
  BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  EXPECT_EQ(rep.limiting_stage, Stage::kCompute);
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(rep.sentence, HasSubstr("waited 30% of training time in hand-offs"));
  EXPECT_THAT(rep.sentence, HasSubstr("pinned buffers were in use"));
  // A stage slower than compute is named even though the pool was full too.
  s.decompress_ns = 2400;
  rep = AnalyzeRun(MakeRun(s), nullptr, 16);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  // Without a full pool the pool is not mentioned.
  s.decompress_ns = 200;
  run = MakeRun(s);
  run.pipeline.stages[static_cast<int>(Stage::kPinnedWait)].queue_high_water = 2;
  EXPECT_THAT(AnalyzeRun(run, nullptr, 16).sentence, Not(HasSubstr("pinned buffers")));
}

TEST(BottleneckReportTest, CeilingPercentUsesThreadsUpToCores) {
  Synth s;
  s.decompress_ns = 3000;  // capacity 666.7 k samples/s on 2 threads
  Ceilings c;
  c.decompress.measured = true;
  c.decompress.samples_per_s = 500000;  // per thread
  BottleneckReport rep = AnalyzeRun(MakeRun(s), &c, 16);
  const StageRow& d = rep.row(Stage::kDecompress);
  ASSERT_TRUE(d.pct_of_ceiling.has_value());
  EXPECT_NEAR(*d.pct_of_ceiling, 100.0 * (2e9 / 3000) / 1e6, 1e-9);
  EXPECT_THAT(rep.sentence, HasSubstr("of its ceiling"));
  EXPECT_FALSE(rep.row(Stage::kRead).pct_of_ceiling.has_value());  // not measured
  // On one core, two threads can use only one core's ceiling.
  rep = AnalyzeRun(MakeRun(s), &c, 1);
  EXPECT_NEAR(*rep.row(Stage::kDecompress).pct_of_ceiling, 100.0 * (2e9 / 3000) / 5e5, 1e-9);
}

TEST(BottleneckReportTest, EmptyRunHasNoVerdict) {
  BottleneckReport rep = AnalyzeRun(RunRecord{}, nullptr, 2);
  EXPECT_EQ(rep.verdict, VerdictClass::kNoData);
  EXPECT_THAT(rep.sentence, HasSubstr("no data"));
  EXPECT_THAT(rep.ToText(), HasSubstr("no data"));
}

}  // namespace
}  // namespace sluice
