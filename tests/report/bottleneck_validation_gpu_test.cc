// The GPU half of the bottleneck report's validation: on a CUDA device, a delay
// injected into the H2D upload or into the GPU compute step makes the report name that stage,
// with the prediction within 15% of the measured throughput. Skips, saying why, without a GPU
// or without the data: Fashion-MNIST (IDX files or a sluice shard dataset) from
// $SLUICE_GPU_TEST_DATA (the GPU check's bundle sets it), else the IDX files of this machine.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "engine/backend.h"
#include "engine/job/train_job.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"

namespace sluice {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

std::string DataPath() {
  const char* env = std::getenv("SLUICE_GPU_TEST_DATA");
  return env != nullptr && *env != '\0' ? env : kFashionMnist;
}

bool HasData(const std::string& dir) {
  return Env::Default()->FileExists(dir + "/train-images-idx3-ubyte.gz") ||
         Env::Default()->FileExists(dir + "/train.manifest.json");
}

class BottleneckValidationGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device::CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: this GPU test needs one (ctest -L gpu on a CUDA machine)";
    }
    if (!HasData(DataPath())) {
      GTEST_SKIP() << "no Fashion-MNIST under " << DataPath()
                   << " (IDX files or a sluice shard dataset; set SLUICE_GPU_TEST_DATA)";
    }
    char tmpl[] = "/tmp/sluice_bottleneck_gpu_test_XXXXXX";
    cache_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!cache_.empty()) std::system(absl::StrCat("rm -rf ", cache_).c_str());
  }

  void ExpectVerdict(Stage stage, int64_t delay_us, Stage expected) {
    TrainJobOptions o;
    o.data = DataPath();
    o.cache_dir = cache_;
    o.backend.device.platform = device::Platform::kCuda;
    o.epochs = 1;
    o.evaluate = false;
    o.pipeline.order.batch_size = 256;
    o.pipeline.format.h2d_format = H2DFormat::kU8;
    if (stage == Stage::kCompute) {
      o.inject_compute_delay_us = delay_us;
    } else {
      o.pipeline.diagnostics.inject_delay_us[static_cast<int>(stage)] = delay_us;
    }
    auto result = RunTrainJob(Env::Default(), o);
    ASSERT_TRUE(result.ok()) << result.status();
    BottleneckReport report = AnalyzeRun(result->run, nullptr, 2);
    SCOPED_TRACE(report.ToText());
    EXPECT_EQ(report.limiting_stage, expected) << report.sentence;
    const double measured = result->train.samples / result->train.train_seconds;
    EXPECT_NEAR(report.predicted_samples_per_s / measured, 1.0, 0.15);
  }

  std::string cache_;
};

// 235 batches of 256: 2 ms per upload (128 k samples/s) is far below anything else on a GPU.
TEST_F(BottleneckValidationGpuTest, DelayedUploadIsNamed) {
  ExpectVerdict(Stage::kH2D, 2000, Stage::kH2D);
}

TEST_F(BottleneckValidationGpuTest, DelayedGpuComputeIsNamed) {
  ExpectVerdict(Stage::kCompute, 2000, Stage::kCompute);
}

}  // namespace
}  // namespace sluice
