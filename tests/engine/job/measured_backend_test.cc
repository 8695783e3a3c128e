// MeasuredBackend's CPU-time figure for host steps (ComputeStats::cpu_ns): the CPU clocks of the
// calling thread and of the backend's team, plus an injected delay counted once per compute
// thread (a slower step, not a starved one: docs/bottleneck.md).
#include "engine/job/measured_backend.h"

#include <memory>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

std::unique_ptr<Backend> MakeCpu(int threads, int max_batch) {
  BackendOptions options;
  options.max_batch = max_batch;
  OptimizerConfig opt;
  return testing::MakeCpuBackend(InitModelState(ModelConfig{}, opt, 1), opt, options,
                                 {.threads = threads});
}

TEST(MeasuredBackendTest, HostStepsCountTheirThreadsCpuTime) {
  const testing::Dataset d = testing::MakeDataset(64, 784, 10, 0.5, 1);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    auto cpu = MakeCpu(threads, 64);
    MeasuredBackend measured(cpu.get(), /*compute_free=*/false, /*delay_us=*/0,
                             /*keep_spans=*/false);
    for (int s = 0; s < 20; ++s) {
      ASSERT_TRUE(measured.TrainStep(testing::U8Batch(d, 0, 64, 784), 0.01f).ok());
    }
    const ComputeStats& stats = measured.stats();
    EXPECT_EQ(stats.threads, threads);
    EXPECT_GT(stats.cpu_ns, 0);
    EXPECT_GT(stats.busy_ns, 0);
    // One thread's CPU clock cannot run ahead of the wall clock around it (its steps' span).
    if (threads == 1) {
      EXPECT_LE(stats.cpu_ns, stats.busy_ns + 1'000'000);
    }
  }
}

TEST(MeasuredBackendTest, InjectedDelayCountsAsCpuOnEveryComputeThread) {
  const testing::Dataset d = testing::MakeDataset(8, 784, 10, 0.5, 2);
  auto cpu = MakeCpu(2, 8);
  constexpr int64_t kDelayUs = 2000;
  MeasuredBackend measured(cpu.get(), /*compute_free=*/false, kDelayUs, /*keep_spans=*/false);
  for (int s = 0; s < 5; ++s) {
    ASSERT_TRUE(measured.TrainStep(testing::U8Batch(d, 0, 8, 784), 0.01f).ok());
  }
  const ComputeStats& stats = measured.stats();
  EXPECT_GE(stats.busy_ns, 5 * kDelayUs * 1000);     // the spin is inside the step's span
  EXPECT_GE(stats.cpu_ns, 5 * kDelayUs * 1000 * 2);  // once per compute thread
}

}  // namespace
}  // namespace sluice
