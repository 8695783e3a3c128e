// Placement follows from the backend: a CPU run never uploads a batch, a sim run uploads every
// batch to its device, and the sim run (poison and jitter on) ends bitwise equal to the CPU
// run: the same kernels in the same order, fed through the copy stream, the device ring and
// the ready/released events.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/limits.h"
#include "engine/job/train_job.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

class PlacementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Env::Default()->FileExists(std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed under " << kFashionMnist;
    }
    char tmpl[] = "/tmp/sluice_placement_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(absl::StrCat("rm -rf ", dir_).c_str());
  }

  TrainJobOptions Job(const std::string& device, const std::string& export_name) {
    TrainJobOptions o;
    o.data = kFashionMnist;
    o.cache_dir = dir_;
    o.backend.device = *device::ParseDeviceSpec(device);
    o.epochs = 1;
    o.evaluate = false;
    o.stop_after_steps = 300;
    o.optimizer.momentum = 0.9f;
    o.pipeline.order.batch_size = 64;
    o.pipeline.order.shuffle = true;
    o.pipeline.resources.threads = 2;
    o.pipeline.resources.device_ring_depth = 2;
    o.export_safetensors = absl::StrCat(dir_, "/", export_name);
    return o;
  }

  std::string dir_;
};

TEST_F(PlacementTest, CpuBackendNeverUploadsAndSimUploadsEveryBatch) {
  auto cpu = RunTrainJob(Env::Default(), Job("cpu", "cpu.safetensors"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cpu->run.compute.on_device);
  EXPECT_EQ(cpu->run.pipeline.ring_depth, 0u);
  EXPECT_EQ(cpu->run.pipeline[Stage::kH2D].items, 0u);

  TrainJobOptions o = Job("sim", "sim.safetensors");
  o.backend.sim.device.poison = true;
  o.backend.sim.device.jitter_seed = 5;
  o.backend.sim.device.link_bytes_per_s = 1e9;
  auto sim = RunTrainJob(Env::Default(), o);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_TRUE(sim->run.compute.on_device);
  EXPECT_EQ(sim->run.pipeline.ring_depth, 2u);
  EXPECT_EQ(sim->run.pipeline[Stage::kH2D].items, sim->run.compute.steps);
  EXPECT_EQ(sim->train.samples, cpu->train.samples);

  // Bitwise the same weights: the exports are byte-identical.
  auto a = ReadFileToString(Env::Default(), absl::StrCat(dir_, "/cpu.safetensors"));
  auto b = ReadFileToString(Env::Default(), absl::StrCat(dir_, "/sim.safetensors"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b) << "the sim run's weights differ from the CPU run's";
}

// The CPU backend's default compute threads leave the pipeline a quarter of the cores (rounded
// down, at most its own threads); --compute-threads overrides; the run records what it used.
TEST(ComputeThreadsTest, DefaultLeavesThePipelineAQuarterOfTheCores) {
  EXPECT_EQ(DefaultComputeThreads(1, 0), 1);
  EXPECT_EQ(DefaultComputeThreads(2, 0), 2);
  EXPECT_EQ(DefaultComputeThreads(4, 0), 3);
  EXPECT_EQ(DefaultComputeThreads(8, 0), 6);
  EXPECT_EQ(DefaultComputeThreads(16, 1), 15);  // a 1-thread pipeline needs at most 1 core
  EXPECT_EQ(DefaultComputeThreads(0, 0), 1);
  TrainJobOptions o;
  o.pipeline.resources.threads = 1;
  EXPECT_EQ(ComputeThreadsFor(o), DefaultComputeThreads(UsableCores(), 1));
  o.backend.cpu.threads = 3;
  EXPECT_EQ(ComputeThreadsFor(o), 3);
  EXPECT_EQ(CeilingOptionsFor(o).backend.cpu.threads, 3);  // the compute ceiling uses as many
}

TEST_F(PlacementTest, TheRunRecordsTheThreadsItComputedOn) {
  TrainJobOptions o = Job("cpu", "threads.safetensors");
  o.stop_after_steps = 20;
  o.backend.cpu.threads = 2;
  auto run = RunTrainJob(Env::Default(), o);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->run.compute.threads, 2);
}

}  // namespace
}  // namespace sluice
