// End-to-end validation of the bottleneck report: real training runs on the CPU
// backend with a delay injected into one stage. A delay that makes a stage the slowest must
// make the report name that stage, the predicted throughput must be within 15% of the
// measured one, and the what-if run that makes that stage free must be clearly faster.
//
// These runs measure real time, so ctest runs them alone (RUN_SERIAL); the delays are chosen
// so the delayed stage is 2-3x slower than anything else, far outside run-to-run noise.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "engine/diagnostics/ceilings.h"
#include "engine/job/train_job.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "report/stages.h"
#include "storage/dataset.h"

namespace sluice {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

class BottleneckValidationTest : public ::testing::Test {
 protected:
  // Real data (Fashion-MNIST, installed by scripts/install-deps.sh), so every stage does its
  // usual amount of work; sharded once into a temporary cache.
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sluice_bottleneck_test_XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
  }
  void SetUp() override {
    if (!Env::Default()->FileExists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed under " << kFashionMnist
                   << " (apt-get install dataset-fashion-mnist)";
    }
  }
  static void TearDownTestSuite() {
    std::system(absl::StrCat("rm -rf ", *dir_).c_str());
    delete dir_;
  }

  static TrainJobOptions Job() {
    TrainJobOptions o;
    o.data = kFashionMnist;
    o.cache_dir = *dir_;
    o.backend.device.platform = device::Platform::kCpu;
    o.epochs = 1;
    o.evaluate = false;
    o.pipeline.order.batch_size = 32;
    o.pipeline.resources.threads = 2;
    return o;
  }

  static double Throughput(const TrainJobResult& r) {
    return r.train.train_seconds > 0 ? r.train.samples / r.train.train_seconds : 0;
  }

  // Runs with `delay_us` injected into `stage` and checks the report names `expected`.
  void ExpectVerdict(const std::string& stage, int64_t delay_us, Stage expected) {
    TrainJobOptions o = Job();
    if (stage == "compute") {
      o.inject_compute_delay_us = delay_us;
    } else {
      o.pipeline.diagnostics.inject_delay_us[static_cast<int>(*ParseStage(stage))] = delay_us;
    }
    // The experimental check: the same job with that stage made free is clearly faster.
    TrainJobOptions free = o;
    if (stage == "compute") {
      free.compute_free = true;
    } else {
      free.pipeline.diagnostics.what_if = *ParseStageWith(stage, &StageInfo::what_if);
    }
    // Both the prediction and the what-if speed-up are checked against wall-clock
    // measurements on a shared 2-core machine: another process taking a core for part of a run
    // makes one run miss (a what-if run at 96 k samples/s where the same run usually does
    // 150 k+). Three attempts of the pair are allowed; a wrong model misses in all.
    absl::StatusOr<TrainJobResult> result, freed;
    BottleneckReport report;
    double measured = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      result = RunTrainJob(Env::Default(), o);
      ASSERT_TRUE(result.ok()) << result.status();
      report = AnalyzeRun(result->run, nullptr, 2);
      measured = Throughput(*result);
      freed = RunTrainJob(Env::Default(), free);
      ASSERT_TRUE(freed.ok()) << freed.status();
      if (report.limiting_stage == expected &&
          std::abs(report.predicted_samples_per_s / measured - 1.0) <= 0.15 &&
          Throughput(*freed) > 1.4 * measured) {
        break;
      }
    }
    SCOPED_TRACE(report.ToText());
    EXPECT_EQ(report.limiting_stage, expected) << report.sentence;
    EXPECT_NE(report.sentence.find(std::string(StageName(expected))), std::string::npos);
    EXPECT_NEAR(report.predicted_samples_per_s / measured, 1.0, 0.15)
        << "predicted " << report.predicted_samples_per_s << " measured " << measured;
    EXPECT_GT(Throughput(*freed), 1.4 * measured)
        << "making " << stage << " free did not speed the run up (" << Throughput(*freed) << " vs "
        << measured << " samples/s)";
  }

  static std::string* dir_;
};
std::string* BottleneckValidationTest::dir_ = nullptr;

TEST_F(BottleneckValidationTest, DelayedReadIsNamed) { ExpectVerdict("read", 6000, Stage::kRead); }
// Compute on two threads does 150-200 k samples/s here, so the delays hold their stage near
// 60 k: 256 samples per frame / 8 ms on 2 threads, 32 per batch / 1.2 ms on 2 threads.
TEST_F(BottleneckValidationTest, DelayedDecompressIsNamed) {
  ExpectVerdict("decompress", 8000, Stage::kDecompress);
}
TEST_F(BottleneckValidationTest, DelayedPreprocessIsNamed) {
  ExpectVerdict("preprocess", 1200, Stage::kPreprocess);
}
TEST_F(BottleneckValidationTest, DelayedComputeIsNamed) {
  ExpectVerdict("compute", 300, Stage::kCompute);
}

// Without a delay the CPU backend's compute (~0.2 M samples/s) is far slower than every
// pipeline stage (> 1 M samples/s each): the report must not blame the pipeline.
// Three attempts, as the delayed runs have: a machine loaded by other tests can starve the
// pipeline's threads for one run (seen twice in full ctest -j2 runs); a report that blames
// the pipeline for an undelayed run fails all three.
TEST_F(BottleneckValidationTest, UndelayedRunNamesCompute) {
  BottleneckReport report;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto result = RunTrainJob(Env::Default(), Job());
    ASSERT_TRUE(result.ok()) << result.status();
    report = AnalyzeRun(result->run, nullptr, 2);
    if (report.limiting_stage == Stage::kCompute && report.verdict == VerdictClass::kComputeBound) {
      return;
    }
    std::printf("attempt %d: %s\n", attempt + 1, report.sentence.c_str());
  }
  SCOPED_TRACE(report.ToText());
  EXPECT_EQ(report.limiting_stage, Stage::kCompute) << report.sentence;
  EXPECT_EQ(report.verdict, VerdictClass::kComputeBound) << report.sentence;
}

// A stage can never beat what it does alone: every "% of ceiling" of a real run stays at or
// below 100%, up to this machine's run-to-run noise. (The compute ceiling used to be measured
// on synthetic dense pixels, while real data takes the sparse path: 319% of its "ceiling".)
TEST_F(BottleneckValidationTest, RealRunStaysWithinItsCeilings) {
  // Both figures are wall-clock measurements on a shared 2-core machine whose second core is
  // sometimes much slower (docs/benchmarks.md): compute on 2 threads read 119% of a ceiling
  // measured in a slow second, and one local run in about a dozen missed in all of three
  // attempts. Five attempts (run, then ceilings) are allowed; a stage whose ceiling is measured
  // on the wrong work (the old 319%) exceeds it in all five.
  TrainJobOptions o = Job();
  BottleneckReport report;
  int compared = 0;
  bool within = false;
  for (int attempt = 0; attempt < 5 && !within; ++attempt) {
    auto result = RunTrainJob(Env::Default(), o);
    ASSERT_TRUE(result.ok()) << result.status();
    auto dataset = Dataset::Open(Env::Default(), result->train_manifest);
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    CeilingOptions c = CeilingOptionsFor(o);
    c.seconds_per_measurement = 0.6;
    auto ceilings = Ceilings::Measure(**dataset, c);
    ASSERT_TRUE(ceilings.ok()) << ceilings.status();
    ASSERT_TRUE(ceilings->compute.measured) << ceilings->compute.note;
    report = AnalyzeRun(result->run, &*ceilings, 2);
    compared = 0;
    within = true;
    for (const StageRow& r : report.stages) {
      if (!r.pct_of_ceiling) continue;
      ++compared;
      within = within && *r.pct_of_ceiling <= 115.0;
    }
  }
  SCOPED_TRACE(report.ToText());
  for (const StageRow& r : report.stages) {
    if (!r.pct_of_ceiling) continue;
    EXPECT_LE(*r.pct_of_ceiling, 115.0) << StageName(r.stage) << " exceeds its ceiling";
  }
  EXPECT_GE(compared, 4);  // read, decompress, preprocess, compute
}

}  // namespace
}  // namespace sluice
