// Every kind of advice is an experiment: for each setting the verdict may advise, a scenario
// whose limit that setting relieves (a small pool, a one-slot device ring, one decompress or
// preprocess thread with an injected per-item delay, a slow modelled link) gets that advice,
// and CheckAdvice measures the advised change at least 1.10x the run as it was. Timed runs:
// each scenario gets three attempts (a VM's swing is +-25%); a wrong piece of advice fails all
// three. docs/bottleneck.md ("Advice and its measured effect") lists the figures.
//
// Two scenarios pin advice that is no longer given because it did not pay in them: a 5 ms read
// latency (one serial reader: --read-ahead=8 measured 0.91-1.02x) and a pool of one buffer
// (--pool-size=2 measured 0.78x; 2 -> 4 buffers 0.83-1.08x). Not here: --cuda-graph (needs a
// CUDA device) and sluice-shard create --zstd-level (a new dataset, not a rerun's setting).
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "engine/job/advice_check.h"
#include "engine/job/job_report.h"
#include "engine/job/train_job.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "report/stages.h"

namespace sluice {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
constexpr int kAttempts = 3;
constexpr int64_t kSteps = 120;

struct Scenario {
  const char* name;
  void (*configure)(TrainJobOptions* job);
  AdviceSetting setting;         // the advice the scenario must get
  const char* value;             // and its value; null: the scenario must not get that setting
  bool needs_idle_core = false;  // more threads of CPU work: pays only with a core to run on
};

// Whether two spinning threads get about two cores now: the premise of advice for more threads
// of CPU work (the injected delays spin). On a VM busy with other processes they do not, and
// no thread count can pay there, so those scenarios skip.
bool TwoCoresAreFree() {
  constexpr auto kSpin = std::chrono::milliseconds(100);
  std::atomic<int64_t> cpu_ns{0};
  auto spin = [&cpu_ns, kSpin] {
    const auto end = std::chrono::steady_clock::now() + kSpin;
    while (std::chrono::steady_clock::now() < end) {
    }
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    cpu_ns += static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  };
  std::thread a(spin);
  std::thread b(spin);
  a.join();
  b.join();
  return cpu_ns.load() >= 0.8 * 2 * std::chrono::nanoseconds(kSpin).count();
}

void SlowLinkF32(TrainJobOptions* o) {
  o->backend.sim.device.link_bytes_per_s = 50e6;  // 4 ms per f32 batch of 64, 1 ms in u8
  o->pipeline.format.h2d_format = H2DFormat::kF32;
}

// One decompress thread that spends 10 ms on each frame of 256 records (26 k samples/s), on a
// run whose other stages are far faster.
void SlowDecompress(TrainJobOptions* o) {
  o->pipeline.resources.decompress_threads = 1;
  o->pipeline.diagnostics.inject_delay_us[static_cast<int>(Stage::kDecompress)] = 10000;
  o->pipeline.format.h2d_format = H2DFormat::kU8;
}

// One preprocess thread that spends 2 ms on each batch of 64 (32 k samples/s), over 400 steps.
// Over 120 steps a second thread measured 1.14-1.21x on an idle 2-core VM, and a CI run
// (2026-12-07) missed 1.10x thrice: with two threads preprocess outruns compute and spends the
// shared cores filling the 64-batch pinned pool ahead of the span (185 batches made for 120
// steps), work a longer span amortizes (300 steps: 1.64x of 1.74x predicted, at 5 ms).
void SlowPreprocess(TrainJobOptions* o) {
  o->stop_after_steps = 400;
  o->pipeline.resources.preprocess_threads = 1;
  o->pipeline.diagnostics.inject_delay_us[static_cast<int>(Stage::kPreprocess)] = 2000;
  o->pipeline.format.h2d_format = H2DFormat::kU8;
}

// One pinned buffer for a pipeline whose every stage outruns compute: batches wait for the
// buffer while compute waits for them.
void SmallPool(TrainJobOptions* o) {
  o->pipeline.resources.pool_size = 1;
  o->pipeline.format.h2d_format = H2DFormat::kU8;
  o->inject_compute_delay_us = 500;
}

// One device slot: a 2 ms copy (u8 batch of 64 over 25 MB/s) and a step of 1 ms of modelled
// device time plus its CPU kernels take turns instead of overlapping. The copy stays the
// slowest stage when other processes slow the kernels: with a 1 ms copy and a 0.5 ms step,
// kernels slowed to 0.9 ms on a machine with half a core taken made compute the limit
// (2026-12-03 CI: step p50 1.38 ms), and no ring advice was given.
void OneRingSlot(TrainJobOptions* o) {
  o->pipeline.resources.device_ring_depth = 1;
  o->pipeline.format.h2d_format = H2DFormat::kU8;
  o->backend.sim.device.link_bytes_per_s = 25e6;
  o->inject_compute_delay_us = 1000;
}

// Each copy 2 ms late on the simulated link, whatever its size: the link is bound by copies,
// not bytes (u8 batches price at 1.00x), and each batch of twice the samples pays the latency
// once.
void LatencyBoundLink(TrainJobOptions* o) {
  o->backend.sim.device.link_latency_ns = 2'000'000;
  o->pipeline.format.h2d_format = H2DFormat::kU8;
}

// The serial reader sleeps 5 ms on each frame of 256 records (51 k samples/s).
void SlowRead(TrainJobOptions* o) {
  o->pipeline.diagnostics.inject_delay_us[static_cast<int>(Stage::kRead)] = 5000;
  o->pipeline.format.h2d_format = H2DFormat::kU8;
}

const Scenario kScenarios[] = {
    {"SlowRead", SlowRead, AdviceSetting::kReadAhead, nullptr},
    {"SlowLinkF32", SlowLinkF32, AdviceSetting::kH2DFormat, "u8"},
    {"SlowDecompress", SlowDecompress, AdviceSetting::kDecompressThreads, "2", true},
    {"SlowPreprocess", SlowPreprocess, AdviceSetting::kPreprocessThreads, "2", true},
    {"SmallPool", SmallPool, AdviceSetting::kPoolSize, nullptr},
    {"OneRingSlot", OneRingSlot, AdviceSetting::kDeviceRingDepth, "2"},
    {"LatencyBoundLink", LatencyBoundLink, AdviceSetting::kBatchSize, "128"},
};

class ScenarioDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Env::Default()->FileExists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed under " << kFashionMnist;
    }
    char tmpl[] = "/tmp/sluice_advice_scenarios_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(absl::StrCat("rm -rf ", dir_).c_str());
  }

  // Fashion-MNIST on the simulated device, batch 64, two threads, kSteps.
  TrainJobOptions PlainJob() const {
    TrainJobOptions o;
    o.data = kFashionMnist;
    o.cache_dir = dir_;
    o.epochs = 1;
    o.evaluate = false;
    o.stop_after_steps = kSteps;
    o.pipeline.order.batch_size = 64;
    o.pipeline.resources.threads = 2;
    o.backend.device.platform = device::Platform::kSim;
    return o;
  }

  // The run's report against its ceilings, as sluice-train makes it: the advice's prices need
  // them (u8 batches are priced by the h2d ceiling's fixed part per copy).
  BottleneckReport Analyze(const TrainJobOptions& job, const TrainJobResult& run) const {
    std::string why;
    const std::optional<Ceilings> ceilings =
        LoadJobCeilings(Env::Default(), job, run, JobReportSettings{}, &why);
    return AnalyzeRun(run.run, ceilings ? &*ceilings : nullptr, 2);
  }

  std::string dir_;
};

class AdviceScenarioTest : public ScenarioDirTest, public ::testing::WithParamInterface<Scenario> {
 protected:
  TrainJobOptions Job() const {
    TrainJobOptions o = PlainJob();
    GetParam().configure(&o);
    return o;
  }
};

TEST_P(AdviceScenarioTest, IsAdvisedItsSettingAndTheChangeRaisesTheRateByTenPercent) {
  const Scenario& s = GetParam();
  const TrainJobOptions job = Job();
  if (s.needs_idle_core && !TwoCoresAreFree()) {
    GTEST_SKIP() << "two spinning threads did not get two cores: other processes hold them";
  }
  if (s.value == nullptr) {  // advice that did not pay in this scenario is not given
    auto run = RunTrainJob(Env::Default(), job);
    ASSERT_TRUE(run.ok()) << run.status();
    const BottleneckReport report = Analyze(job, *run);
    for (const Advice& a : report.advice) EXPECT_NE(a.setting, s.setting) << report.sentence;
    return;
  }
  double best = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto run = RunTrainJob(Env::Default(), job);
    ASSERT_TRUE(run.ok()) << run.status();
    const BottleneckReport report = Analyze(job, *run);
    const Advice* advice = nullptr;
    for (const Advice& a : report.advice) {
      if (a.setting == s.setting) advice = &a;
    }
    if (advice == nullptr) {
      std::printf("attempt %d: no --%s in:\n%s\n", attempt + 1, AdviceFlag(s.setting),
                  report.ToText().c_str());
      continue;
    }
    EXPECT_EQ(advice->value, s.value) << report.sentence;
    auto checks =
        CheckAdvice(Env::Default(), job, {*advice}, job.stop_after_steps, /*rounds=*/2, nullptr);
    ASSERT_TRUE(checks.ok()) << checks.status();
    ASSERT_EQ(checks->size(), 1u);
    ASSERT_TRUE((*checks)[0].note.empty()) << (*checks)[0].note;
    const AdviceCheck& c = (*checks)[0];
    best = std::max(best, c.speedup());
    std::printf("%s attempt %d: %s gave %.2fx (%.0f -> %.0f samples/s); report: %s\n", s.name,
                attempt + 1, AdviceText(*advice, Consumer::kTrainJob).c_str(), c.speedup(),
                c.before_samples_per_s, c.after_samples_per_s, report.sentence.c_str());
    if (best >= 1.1) return;
  }
  ADD_FAILURE() << s.name << ": the advised --" << AdviceFlag(s.setting)
                << " was never given or never raised the rate by 10%: best " << best << "x";
}

INSTANTIATE_TEST_SUITE_P(EveryAdviceKind, AdviceScenarioTest, ::testing::ValuesIn(kScenarios),
                         [](const ::testing::TestParamInfo<Scenario>& param) {
                           return std::string(param.param.name);
                         });

// What must hold still between identical runs: the class and the limiting stage, and for a
// close call the pair it names (the limiting stage and compute).
std::string VerdictKey(const BottleneckReport& r) {
  return absl::StrCat(VerdictClassName(r.verdict), " / ", StageName(r.limiting_stage),
                      r.sentence.find("close call") != std::string::npos ? " (close call)" : "");
}

// Five identical runs give one verdict. A scenario with a clear limit (the SlowLinkF32 link)
// and the plain run, whose verdict was the one seen flipping between identical runs.
TEST_F(ScenarioDirTest, FiveIdenticalRunsGiveTheSameVerdict) {
  TrainJobOptions slow_link = PlainJob();
  SlowLinkF32(&slow_link);
  TrainJobOptions plain = PlainJob();
  plain.stop_after_steps = -1;  // a whole epoch (938 steps): a short span's start-up swings it
  for (const TrainJobOptions& job : {slow_link, plain}) {
    std::vector<std::string> keys;
    for (int run_index = 0; run_index < 5; ++run_index) {
      auto run = RunTrainJob(Env::Default(), job);
      ASSERT_TRUE(run.ok()) << run.status();
      const BottleneckReport report = Analyze(job, *run);
      keys.push_back(VerdictKey(report));
      std::printf("run %d: %s\n", run_index + 1, report.sentence.c_str());
    }
    for (const std::string& key : keys) EXPECT_EQ(key, keys[0]) << "identical runs disagree";
  }
}

}  // namespace
}  // namespace sluice
