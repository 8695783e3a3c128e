#include "engine/diagnostics/bottleneck_report.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A synthetic run: per-sample busy ns of each stage (busy summed over its threads), the
// concurrency of decompress and preprocess, and how the run went. Training time is what the
// slowest stage allows (plus 2%), and compute waited for the rest.
struct Synth {
  double read_ns = 100, decompress_ns = 200, preprocess_ns = 200, compute_ns = 500, h2d_ns = 0;
  int decompress_conc = 2, preprocess_conc = 2;
  bool cuda = false;      // a device run (CUDA): compute timed by events on its stream
  double wait_pct = -1;   // >= 0: force compute's wait (% of training time)
  double host_wait_pct = -1;  // device runs: the host's wait in Next(); < 0: wait_pct
  double enqueue_ns = -1;     // device runs: host enqueue per sample; < 0: a tenth of compute
  double train_ns_per_sample = -1;  // > 0: force the training time
  double pinned_wait_pct = 0;
  int compute_threads = 1;  // CPU runs: the threads each step is split across
  double compute_cpu_ns = 0;  // CPU runs: measured CPU time per sample of compute (0: none)
};

constexpr uint64_t kSamples = 60000;
constexpr int64_t kT0 = 1'000'000'000;

StageStats Graph(Stage s, int conc, double ns_per_sample, double train_ns, uint64_t items) {
  StageStats st;
  st.stage = s;
  st.concurrency = conc;
  st.items = items;
  st.samples = kSamples;
  st.bytes = kSamples * 784;
  st.busy_ns = static_cast<int64_t>(ns_per_sample * kSamples);
  st.first_start_ns = kT0;
  st.last_end_ns = kT0 + static_cast<int64_t>(train_ns);
  const int64_t idle = std::max<int64_t>(0, static_cast<int64_t>(conc * train_ns) - st.busy_ns);
  st.wait_input_ns = idle / 2;
  st.wait_output_ns = idle - idle / 2;
  st.queue_high_water = 3;
  return st;
}

RunRecord MakeRun(const Synth& s) {
  double per_sample = std::max({s.read_ns, s.decompress_ns / s.decompress_conc,
                                s.preprocess_ns / s.preprocess_conc, s.compute_ns, s.h2d_ns});
  if (s.train_ns_per_sample > 0) per_sample = s.train_ns_per_sample;
  const double train_ns = per_sample * 1.02 * kSamples;
  RunRecord r;
  r.train_seconds = train_ns / 1e9;
  r.samples = kSamples;
  PipelineStats& p = r.pipeline;
  for (int i = 0; i < kNumPipelineStages; ++i) p.stages[i].stage = static_cast<Stage>(i);
  p.stages[0] = Graph(Stage::kRead, 1, s.read_ns, train_ns, kSamples / 256);
  p.stages[1] = Graph(Stage::kDecompress, s.decompress_conc, s.decompress_ns, train_ns,
                      kSamples / 256);
  p.stages[2] = Graph(Stage::kPreprocess, s.preprocess_conc, s.preprocess_ns, train_ns,
                      kSamples / 32);
  if (s.h2d_ns > 0) p.stages[4] = Graph(Stage::kH2D, 1, s.h2d_ns, train_ns, kSamples / 32);
  p.stages[3].items = 10;
  p.stages[3].busy_ns = static_cast<int64_t>(s.pinned_wait_pct / 100 * train_ns);
  p.stages[3].queue_high_water = 4;
  p.pool_buffers = 4;
  const double compute_busy = s.compute_ns * kSamples;
  const double wait = s.wait_pct >= 0 ? s.wait_pct / 100 * train_ns
                                      : std::max(0.0, train_ns - compute_busy) * 0.95;
  p.stages[5].stage = Stage::kDelivery;
  p.stages[5].wait_input_ns = static_cast<int64_t>(
      s.cuda && s.host_wait_pct >= 0 ? s.host_wait_pct / 100 * train_ns : wait);
  p.stages[5].queue_high_water = 2;
  ComputeStats& c = r.compute;
  c.steps = kSamples / 32;
  c.samples = kSamples;
  c.busy_ns = static_cast<int64_t>(compute_busy);
  c.first_start_ns = kT0;
  c.last_end_ns = kT0 + static_cast<int64_t>(train_ns);
  c.device = s.cuda ? "cuda:0 (test)" : "cpu (test)";
  c.is_cuda = s.cuda;
  c.on_device = s.cuda;
  c.threads = s.compute_threads;
  c.cpu_ns = static_cast<int64_t>(s.compute_cpu_ns * kSamples);
  if (s.cuda) {
    c.idle_ns = static_cast<int64_t>(wait);
    c.enqueue_ns = static_cast<int64_t>((s.enqueue_ns >= 0 ? s.enqueue_ns : s.compute_ns / 10) *
                                        kSamples);
  } else {
    c.enqueue_ns = c.busy_ns;
  }
  r.memory.current_bytes[static_cast<int>(MemoryTag::kParameters)] = 407080;
  r.memory.total_current = 407080;
  r.memory_formula.parameters = 407080;
  r.memory_formula.gradients = 407080;
  return r;
}

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
  for (const Case& c : {Case{25, VerdictClass::kInputBound}, Case{21, VerdictClass::kInputBound},
                        Case{12, VerdictClass::kPartlyInputBound},
                        Case{5.5, VerdictClass::kPartlyInputBound},
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
  EXPECT_THAT(rep.sentence, HasSubstr("2 cores are saturated"));
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
  EXPECT_THAT(rep.ToText(), HasSubstr("2.45 threads busy"));
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
  // Not when this run's own stages saturate the cores (that clause names them instead).
  rep = AnalyzeRun(MakeRun(c), nullptr, /*cores=*/1);
  EXPECT_THAT(rep.sentence, Not(HasSubstr("other processes")));
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

TEST(BottleneckReportTest, OversubscribedCoresDoNotPredictBelowTheMeasuredRate) {
  // A delayed decompress spinning on both cores while compute also runs: wall busy times add
  // up to more than 2 cores, so the CPU formula undershoots; the prediction stays at what the
  // saturated cores did, and the verdict still names decompress.
  Synth s;
  s.read_ns = 100;
  s.decompress_ns = 4000;
  s.preprocess_ns = 1000;
  s.compute_ns = 1000;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 2);
  EXPECT_EQ(rep.verdict, VerdictClass::kCpuBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  EXPECT_THAT(rep.sentence, HasSubstr("decompress is the limit"));
  EXPECT_GT(rep.cpu_threads_busy, 2.0);
  EXPECT_LT(rep.cpu_limit_samples_per_s, rep.measured_samples_per_s);
  EXPECT_NEAR(rep.predicted_samples_per_s, rep.measured_samples_per_s, 1e-6);
}

// On a device, launch-bound means the compute stream idled while the host, which never waited
// for data, took longer to enqueue a step than the device to run it.
TEST(BottleneckReportTest, LaunchBoundOnADeviceOnlyWhenEnqueueIsTheLimit) {
  Synth s;
  s.cuda = true;
  s.compute_ns = 200;   // device time per sample
  s.enqueue_ns = 800;   // host enqueue per sample
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

TEST(BottleneckReportTest, StarvedWithFullPoolAndNoSlowStageBlamesThePool) {
  // Every stage is faster than compute, yet compute waited 30% with all 4 buffers in use.
  Synth s;
  s.compute_ns = 900;
  s.wait_pct = 30;
  s.pinned_wait_pct = 500;  // summed over waiting batches: far above 100%
  RunRecord run = MakeRun(s);
  BottleneckReport rep = AnalyzeRun(run, nullptr, 16);
  EXPECT_EQ(rep.limiting_stage, Stage::kPinnedWait);
  EXPECT_THAT(rep.sentence, HasSubstr("--pool-size"));
  // A stage slower than compute is named even though the pool was full too.
  s.decompress_ns = 2400;
  rep = AnalyzeRun(MakeRun(s), nullptr, 16);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  // Without a full pool the pool is not blamed.
  s.decompress_ns = 200;
  run = MakeRun(s);
  run.pipeline.stages[3].queue_high_water = 2;
  EXPECT_NE(AnalyzeRun(run, nullptr, 16).limiting_stage, Stage::kPinnedWait);
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

TEST(BottleneckReportTest, TextHasTableVerdictAndMemory) {
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  const std::string text = rep.ToText();
  for (const char* s : {"read", "decompress", "preprocess", "pinned_wait", "h2d", "compute",
                        "measured", "predicted", "verdict: ", "parameters", "optimizer"}) {
    EXPECT_THAT(text, HasSubstr(s));
  }
  EXPECT_THAT(text, HasSubstr(rep.sentence));
}

// Every field path of the JSON, arrays as "name[]".
void Paths(const nlohmann::ordered_json& j, const std::string& prefix, std::set<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string p = prefix.empty() ? it.key() : prefix + "." + it.key();
      out->insert(p);
      Paths(it.value(), p, out);
    }
  } else if (j.is_array() && !j.empty() && j.front().is_object()) {
    Paths(j.front(), prefix + "[]", out);
  }
}

TEST(BottleneckReportTest, JsonHasEveryDocumentedFieldAndNoOther) {
  Ceilings c;
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), &c, 2);
  rep.host_memory.lines.push_back({"train: pinned batch pool", 1});  // so lines[] has its fields
  const nlohmann::ordered_json j = rep.ToJson();
  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_EQ(j["stages"].size(), static_cast<size_t>(kNumReportStages));
  std::set<std::string> paths;
  Paths(j, "", &paths);
  std::ifstream doc(std::string(SLUICE_SOURCE_DIR) + "/docs/report-schema.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;  // the first cell of each table row "| `path` | ..."
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## Data-parallel runs", 0) == 0) break;  // fields a single process lacks
    if (line.rfind("| `", 0) != 0) continue;
    documented.insert(line.substr(3, line.find('`', 3) - 3));
  }
  for (const std::string& p : paths) EXPECT_TRUE(documented.count(p)) << "undocumented: " << p;
  for (const std::string& p : documented) EXPECT_TRUE(paths.count(p)) << "not in the JSON: " << p;
  // It round-trips through text.
  EXPECT_EQ(nlohmann::ordered_json::parse(j.dump()), j);
}

TEST(BottleneckReportTest, RowsAreTheReportStagesInOrderNamedInTheJson) {
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  ASSERT_EQ(rep.stages.size(), kReportStages.size());
  const nlohmann::ordered_json j = rep.ToJson();
  const char* names[] = {"read", "decompress", "preprocess", "pinned_wait", "h2d", "compute"};
  for (int i = 0; i < kNumReportStages; ++i) {
    EXPECT_EQ(rep.stages[i].stage, kReportStages[i]);
    EXPECT_EQ(&rep.row(kReportStages[i]), &rep.stages[i]);
    EXPECT_EQ(j["stages"][i]["stage"], names[i]);
  }
  EXPECT_EQ(j["verdict"]["limiting_stage"], std::string(StageName(rep.limiting_stage)));
  EXPECT_EQ(j["verdict"]["class"], VerdictClassName(rep.verdict));
  // Key order is part of the output (ordered_json): the documented order.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "schema", "device", "is_cuda", "on_device", "cores", "train_seconds",
                      "samples", "steps", "measured_samples_per_s", "predicted_samples_per_s",
                      "capacity_limit_samples_per_s", "cpu_limit_samples_per_s",
                      "cpu_threads_busy", "cpu_saturated", "input_bound_pct", "host_wait_pct",
                      "compute_host_pct",
                      "verdict", "stages", "pipeline", "memory", "ceilings", "notes"}));
  EXPECT_EQ(j["stages"][0].begin().key(), "stage");
  EXPECT_TRUE(j["stages"][static_cast<int>(Stage::kPinnedWait)]["capacity_samples_per_s"].is_null());
}

// --- Data-parallel runs (AddWorldFigures) ---

constexpr int64_t kGradientBytes = 407080;  // the 784-128-10 MLP's 101,770 floats
constexpr int64_t kSteps = 1000;

// One rank of a data-parallel run: 1 s of training, `in_exchange_pct` of it in the exchange's
// collectives (90% in the gradient all-reduces, 10% agreeing on the sample count).
RankSummary SynthRank(int rank, double in_exchange_pct, const std::string& verdict = "compute-bound",
                      const std::string& stage = "compute") {
  RankSummary s;
  s.rank = rank;
  s.hostname = "host";
  s.train_seconds = 1.0;
  s.samples = 32000;
  s.samples_per_s = 32000;
  s.verdict_class = verdict;
  s.limiting_stage = stage;
  s.sentence = verdict + ": rank " + std::to_string(rank) + "'s own sentence";
  s.exchange_steps = kSteps;
  s.exchange_bytes = kSteps * kGradientBytes;
  const int64_t ns = static_cast<int64_t>(in_exchange_pct / 100 * 1e9);
  s.exchange_busy_ns = ns / 10 * 9;
  s.exchange_count_ns = ns - s.exchange_busy_ns;
  s.exchange_pct = in_exchange_pct;
  s.frames_decoded = 300;
  return s;
}

AllReduceCeiling SynthCeiling(double gb_per_s) {
  AllReduceCeiling c;
  c.measured = true;
  c.world_size = 2;
  c.local_size = 2;
  c.bytes = kGradientBytes;
  c.warmups = 3;
  c.repetitions = 20;
  c.gb_per_s = gb_per_s;
  c.median_us = kGradientBytes / gb_per_s / 1e3;
  c.note = "synthetic";
  return c;
}

BottleneckReport WorldReport(const std::vector<RankSummary>& ranks, bool cuda = false,
                             std::optional<uint64_t> frames_one_process = 400) {
  Synth s;
  s.cuda = cuda;
  BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 2);
  AddWorldFigures(ranks, SynthCeiling(9.046), frames_one_process, &rep);
  return rep;
}

TEST(DataParallelReportTest, ExchangeFiguresPerStepBandwidthAndCeiling) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)});
  ASSERT_TRUE(rep.exchange.has_value());
  const ExchangeFigures& x = *rep.exchange;
  EXPECT_EQ(x.world_size, 2);
  EXPECT_EQ(x.steps, static_cast<uint64_t>(kSteps));
  EXPECT_EQ(x.bytes_per_step, kGradientBytes);
  // Rank 0: 120 ms in the exchange, 108 ms of it in the all-reduces, over 1000 steps.
  ASSERT_TRUE(x.time_per_step_us.has_value());
  EXPECT_NEAR(*x.time_per_step_us, 108.0, 1e-6);
  EXPECT_NEAR(x.count_time_per_step_us, 12.0, 1e-6);
  EXPECT_NEAR(x.train_pct, 12.0, 1e-9);
  // The straggler (rank 1) waits for no one: its 90 us all-reduce is the pure cost.
  EXPECT_NEAR(x.pure_pct, 10.0, 1e-9);
  ASSERT_TRUE(x.achieved_gb_per_s.has_value());
  EXPECT_NEAR(*x.achieved_gb_per_s, kGradientBytes / 90000.0, 1e-9);
  ASSERT_TRUE(x.pct_of_ceiling.has_value());
  EXPECT_NEAR(*x.pct_of_ceiling, 100.0 * kGradientBytes / 90000.0 / 9.046, 1e-6);
  ASSERT_TRUE(x.hidden_pct.has_value());
  EXPECT_EQ(*x.hidden_pct, 0.0);  // blocking on CPU
  EXPECT_THAT(x.hidden_note, HasSubstr("blocks the step's thread"));
  // 2 x 300 frames decoded for the 400 one process decodes.
  EXPECT_EQ(x.frames_decoded, 600u);
  ASSERT_TRUE(x.duplicated_decode_factor.has_value());
  EXPECT_DOUBLE_EQ(*x.duplicated_decode_factor, 1.5);
  EXPECT_THAT(rep.ToText(), HasSubstr("exchange: 2 ranks"));
  EXPECT_THAT(rep.ToText(), HasSubstr("duplicated-decode factor 1.50"));
}

TEST(DataParallelReportTest, UnknownFramesOfOneProcessLeaveTheDecodeFactorNull) {
  const BottleneckReport rep =
      WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)}, false, std::nullopt);
  EXPECT_FALSE(rep.exchange->duplicated_decode_factor.has_value());
  EXPECT_TRUE(rep.ToJson()["exchange"]["duplicated_decode_factor"].is_null());
}

TEST(DataParallelReportTest, OnCudaTheHiddenShareAndExchangeTimeAreNotMeasured) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)}, true);
  EXPECT_FALSE(rep.exchange->hidden_pct.has_value());
  EXPECT_FALSE(rep.exchange->time_per_step_us.has_value());
  EXPECT_FALSE(rep.exchange->achieved_gb_per_s.has_value());
  EXPECT_THAT(rep.exchange->hidden_note, HasSubstr("not measured"));
  const nlohmann::ordered_json j = rep.ToJson();
  EXPECT_TRUE(j["exchange"]["hidden_pct"].is_null());
  EXPECT_THAT(rep.ToText(), HasSubstr("not measured behind compute"));
}

TEST(DataParallelReportTest, TheRankWithTheLeastTimeInTheExchangeIsTheStragglerAndLimitsTheJob) {
  // Rank 1 waits in the exchange only 5% of its time, rank 0 40%: rank 0 waits for rank 1,
  // whose decompress is its limit.
  const BottleneckReport rep = WorldReport(
      {SynthRank(0, 40.0), SynthRank(1, 5.0, "input-bound", "decompress")});
  EXPECT_EQ(rep.exchange->straggler.rank, 1);
  EXPECT_EQ(rep.exchange->straggler.limiting_stage, "decompress");
  EXPECT_NEAR(rep.exchange->straggler.others_wait_pct, 35.0, 1e-9);
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  EXPECT_THAT(rep.sentence,
              HasSubstr("rank 1 is the straggler: its input pipeline (decompress) limits it "
                        "(input-bound); the others wait 35% of the step for it"));
  EXPECT_THAT(rep.sentence, HasSubstr("rank 1's own sentence"));
  // Not communication-bound: the straggler's own exchange is 5%.
  EXPECT_NEAR(rep.exchange->pure_pct, 5.0, 1e-9);
  // Swapped: rank 0 is the straggler; its own verdict stays, the clause is added.
  const BottleneckReport swapped = WorldReport(
      {SynthRank(0, 5.0), SynthRank(1, 40.0)});
  EXPECT_EQ(swapped.exchange->straggler.rank, 0);
  EXPECT_EQ(swapped.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(swapped.sentence, HasSubstr("rank 0 is the straggler: its compute limits it"));
}

TEST(DataParallelReportTest, CommunicationBoundWhenTheStragglersOwnExchangePassesTheThreshold) {
  EXPECT_EQ(kCommunicationBoundPct, 20.0);
  // Just below: the straggler spends 19.9% of its time in the exchange.
  const BottleneckReport below = WorldReport({SynthRank(0, 30.0), SynthRank(1, 19.9)});
  EXPECT_NE(below.verdict, VerdictClass::kCommunicationBound) << below.sentence;
  // Just above.
  const BottleneckReport above = WorldReport({SynthRank(0, 30.0), SynthRank(1, 20.1)});
  EXPECT_EQ(above.verdict, VerdictClass::kCommunicationBound) << above.sentence;
  EXPECT_THAT(above.sentence, HasSubstr("communication-bound: the gradient exchange takes 20% "
                                        "of training time even on rank 1"));
  EXPECT_THAT(above.sentence, HasSubstr("larger global --batch-size"));
  EXPECT_THAT(above.sentence, HasSubstr("NCCL"));
  const nlohmann::ordered_json j = above.ToJson();
  EXPECT_EQ(j["verdict"]["class"], "communication-bound");
  EXPECT_EQ(j["verdict"]["limiting_stage"], "exchange");
  EXPECT_EQ(j["exchange"]["communication_bound_pct"], 20.0);
  // A rank that waits a lot for a straggler is not communication cost: 60% on rank 0, 3% on
  // the straggler.
  const BottleneckReport waiting = WorldReport({SynthRank(0, 60.0), SynthRank(1, 3.0)});
  EXPECT_NE(waiting.verdict, VerdictClass::kCommunicationBound) << waiting.sentence;
}

TEST(DataParallelReportTest, RanksAreListedInTheTextAndTheJson) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)});
  const nlohmann::ordered_json j = rep.ToJson();
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(j["ranks"][r]["rank"], r);
    EXPECT_EQ(j["ranks"][r]["frames_decoded"], 300);
    EXPECT_EQ(j["ranks"][r]["limiting_stage"], "compute");
  }
  const std::string text = rep.ToText();
  EXPECT_THAT(text, HasSubstr("rank host"));
  EXPECT_THAT(text, HasSubstr("\n   1 host "));
  // The key order: the single-process keys, then exchange and ranks before the notes.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  ASSERT_GE(keys.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(keys.end() - 3, keys.end()),
            (std::vector<std::string>{"exchange", "ranks", "notes"}));
}

TEST(DataParallelReportTest, ASingleProcessReportIsUnchanged) {
  const RunRecord run = MakeRun(Synth{});
  const BottleneckReport plain = AnalyzeRun(run, nullptr, 2);
  BottleneckReport with_one_rank = plain;
  AddWorldFigures({SynthRank(0, 0.0)}, AllReduceCeiling{}, 40, &with_one_rank);
  EXPECT_FALSE(with_one_rank.exchange.has_value());
  EXPECT_EQ(with_one_rank.ToText(), plain.ToText());
  EXPECT_EQ(with_one_rank.ToJson(), plain.ToJson());
  EXPECT_FALSE(plain.ToJson().contains("exchange"));
  EXPECT_FALSE(plain.ToJson().contains("ranks"));
  EXPECT_EQ(plain.ToText().find("exchange"), std::string::npos);
}

TEST(DataParallelReportTest, JsonHasEveryDocumentedDataParallelFieldAndNoOther) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)});
  BottleneckReport full = rep;
  full.host_memory.lines.push_back({"train: pinned batch pool", 1});
  Ceilings c;
  full.ceilings = c;
  const nlohmann::ordered_json j = full.ToJson();
  std::set<std::string> paths;
  Paths(j, "", &paths);
  std::ifstream doc(std::string(SLUICE_SOURCE_DIR) + "/docs/report-schema.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;  // every table: the single-process one and the data-parallel
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    documented.insert(line.substr(3, line.find('`', 3) - 3));
  }
  for (const std::string& p : paths) EXPECT_TRUE(documented.count(p)) << "undocumented: " << p;
  for (const std::string& p : documented) EXPECT_TRUE(paths.count(p)) << "not in the JSON: " << p;
}

TEST(DataParallelReportTest, RankSummariesRoundTripAndAMisplacedOneIsDataLoss) {
  RunRecord run = MakeRun(Synth{});
  run.rank = 1;
  run.world_size = 2;
  run.exchange = {kSteps, kSteps * kGradientBytes, 5'000'000, 1'000'000};
  run.pipeline.frames_decoded = 123;
  const BottleneckReport own = AnalyzeRun(run, nullptr, 2);
  const RankSummary s = SummarizeRank(run, own, "node7");
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.hostname, "node7");
  EXPECT_EQ(s.frames_decoded, 123u);
  EXPECT_EQ(s.limiting_stage, std::string(StageName(own.limiting_stage)));
  EXPECT_NEAR(s.exchange_pct, 100.0 * 6e6 / (own.train_seconds * 1e9), 1e-9);
  EXPECT_DOUBLE_EQ(s.stage_busy_pct.compute, own.row(Stage::kCompute).busy_pct);
  const std::string wire = nlohmann::json(s).dump();
  auto parsed = ParseRankSummaries({nlohmann::json(SynthRank(0, 1.0)).dump(), wire});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(nlohmann::json((*parsed)[1]), nlohmann::json(s));
  auto misplaced = ParseRankSummaries({wire});
  EXPECT_EQ(misplaced.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(misplaced.status().message()), HasSubstr("says it is rank 1"));
  EXPECT_EQ(ParseRankSummaries({"{"}).status().code(), absl::StatusCode::kDataLoss);
}

TEST(DataParallelReportTest, TheAllReduceCeilingOfASingleProcessIsNotMeasured) {
  auto one = dist::SingleProcessCommunicator();
  auto c = MeasureAllReduceCeiling(one.get(), kGradientBytes);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->measured);
  EXPECT_THAT(c->note, HasSubstr("not measured"));
}

}  // namespace
}  // namespace sluice
