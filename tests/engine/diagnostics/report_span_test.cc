// The measured rate of the report is the wall-clock rate of the span it covers: jobs run
// in-process (the CPU backend and the simulated device) are timed around RunTrainJob, and the
// report's samples / train_seconds must agree with the wall-clock rate of the training steps
// within 5%. Real timed runs on Fashion-MNIST, so ctest runs them alone.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/limits.h"
#include "engine/diagnostics/bottleneck_report.h"
#include "engine/job/train_job.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

class ReportSpanTest : public ::testing::TestWithParam<device::Platform> {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sluice_report_span_XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
  }
  static void TearDownTestSuite() {
    std::system(absl::StrCat("rm -rf ", *dir_).c_str());
    delete dir_;
  }
  void SetUp() override {
    if (!Env::Default()->FileExists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed under " << kFashionMnist;
    }
  }
  static TrainJobOptions Job(int64_t steps) {
    TrainJobOptions o;
    o.data = kFashionMnist;
    o.cache_dir = *dir_;
    o.backend.device.platform = GetParam();
    o.epochs = 1;
    o.evaluate = false;
    o.stop_after_steps = steps;
    o.pipeline.order.batch_size = 64;
    o.pipeline.resources.threads = 2;
    o.backend.sim.compute_ns_per_step = 2'000'000;
    return o;
  }
  static std::string* dir_;
};
std::string* ReportSpanTest::dir_ = nullptr;

// Seconds of wall clock around RunTrainJob for `steps` steps, and its report's measured rate.
std::pair<double, double> TimedJob(const TrainJobOptions& job) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<TrainJobResult> result = RunTrainJob(Env::Default(), job);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {wall, 0};
  const BottleneckReport rep = AnalyzeRun(result->run, nullptr, UsableCores());
  EXPECT_EQ(rep.samples, static_cast<uint64_t>(job.stop_after_steps) * 64);
  return {wall, rep.measured_samples_per_s};
}

TEST_P(ReportSpanTest, MeasuredRateIsTheWallClockRateOfTheRun) {
  ASSERT_TRUE(RunTrainJob(Env::Default(), Job(5)).ok());  // converts the dataset once
  // The wall clock around RunTrainJob also holds the job's set-up (opening the data, the
  // backend, the model), which is not training: a short run's wall time is taken off a long
  // one's, so the wall-clock rate is that of the long run's extra steps. A machine loaded by
  // other work can stretch one run, so three tries.
  constexpr int64_t kShort = 20, kLong = 400;
  double measured = 0, wall_rate = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const double short_wall = TimedJob(Job(kShort)).first;
    const auto [long_wall, long_measured] = TimedJob(Job(kLong));
    measured = long_measured;
    wall_rate = (kLong - kShort) * 64 / (long_wall - short_wall);
    if (std::abs(measured - wall_rate) <= 0.05 * wall_rate) break;
  }
  EXPECT_NEAR(measured, wall_rate, 0.05 * wall_rate);
}

INSTANTIATE_TEST_SUITE_P(Backends, ReportSpanTest,
                         ::testing::Values(device::Platform::kCpu, device::Platform::kSim),
                         [](const auto& param_info) {
                           return param_info.param == device::Platform::kCpu ? "cpu" : "sim";
                         });

}  // namespace
}  // namespace sluice
