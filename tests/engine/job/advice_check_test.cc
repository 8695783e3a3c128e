// Every piece of advice is an experiment: a run whose limit is known gets the advice that
// relieves it, and the advised change, run by CheckAdvice, raises the measured rate by at least
// 10%. Timed runs: each scenario gets three attempts (a VM's swing is +-25%); a wrong piece of
// advice fails all three.
#include "engine/job/advice_check.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "engine/diagnostics/bottleneck_report.h"
#include "engine/job/train_job.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
constexpr int kAttempts = 3;

class AdviceCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Env::Default()->FileExists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed under " << kFashionMnist;
    }
    char tmpl[] = "/tmp/sluice_advice_check_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(absl::StrCat("rm -rf ", dir_).c_str());
  }

  TrainJobOptions Job() const {
    TrainJobOptions o;
    o.data = kFashionMnist;
    o.cache_dir = dir_;
    o.epochs = 1;
    o.evaluate = false;
    o.stop_after_steps = 150;
    o.pipeline.order.batch_size = 64;
    o.pipeline.resources.threads = 2;
    return o;
  }

  // Runs `job`, checks that its report advises `setting` = `value`, and that the change raises
  // the rate by 10% or more in one of kAttempts attempts.
  void ExpectAdvicePays(const TrainJobOptions& job, AdviceSetting setting,
                        const std::string& value) {
    double best = 0;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      auto run = RunTrainJob(Env::Default(), job);
      ASSERT_TRUE(run.ok()) << run.status();
      const BottleneckReport report = AnalyzeRun(run->run, nullptr, 2);
      const Advice* advice = nullptr;
      for (const Advice& a : report.advice) {
        if (a.setting == setting) advice = &a;
      }
      ASSERT_NE(advice, nullptr) << "no --" << AdviceFlag(setting) << " in: " << report.sentence;
      EXPECT_EQ(advice->value, value);
      auto checks = CheckAdvice(Env::Default(), job, {*advice}, 150, 1, nullptr);
      ASSERT_TRUE(checks.ok()) << checks.status();
      ASSERT_EQ(checks->size(), 1u);
      ASSERT_TRUE((*checks)[0].note.empty()) << (*checks)[0].note;
      best = std::max(best, (*checks)[0].speedup());
      if (best >= 1.1) return;
      std::printf("attempt %d: %s gave %.2fx (%.0f -> %.0f samples/s); report: %s\n", attempt + 1,
                  AdviceText(*advice, Consumer::kTrainJob).c_str(), (*checks)[0].speedup(),
                  (*checks)[0].before_samples_per_s, (*checks)[0].after_samples_per_s,
                  report.sentence.c_str());
    }
    ADD_FAILURE() << "the advised change never raised the rate by 10%: best " << best << "x";
  }

  std::string dir_;
};

// A slow modelled link carrying f32 batches: h2d is the limit, and u8 batches (4x fewer bytes)
// are the advice.
TEST_F(AdviceCheckTest, SlowLinkWithF32BatchesIsAdvisedU8AndU8IsFaster) {
  TrainJobOptions o = Job();
  o.backend.device.platform = device::Platform::kSim;
  o.backend.sim.device.link_bytes_per_s = 50e6;  // 4 ms per f32 batch of 64, 1 ms in u8
  o.pipeline.format.h2d_format = H2DFormat::kF32;
  ExpectAdvicePays(o, AdviceSetting::kH2DFormat, "u8");
}

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
  EXPECT_EQ(ApplyAdvice({AdviceSetting::kZstdLevel, "1", ""}, &o).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyAdvice({AdviceSetting::kPoolSize, "many", ""}, &o).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice
