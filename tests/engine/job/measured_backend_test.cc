// MeasuredBackend's CPU-time figure for host steps (ComputeStats::cpu_ns): the CPU clocks of the
// calling thread and of the backend's team, plus an injected delay counted once per compute
// thread (a slower step, not a starved one: docs/bottleneck.md). On the simulated device: the
// launch-gated share of a step's device time, and the injected delay held on the device.
#include "engine/job/measured_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/backend.h"
#include "engine/sim/sim_backend.h"
#include "gtest/gtest.h"
#include "pipeline/stage_stats.h"
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

std::unique_ptr<Backend> MakeSim(const SimBackendOptions& sim, int max_batch) {
  BackendOptions options;
  options.max_batch = max_batch;
  OptimizerConfig opt;
  auto b = CreateSimBackend(InitModelState(ModelConfig{}, opt, 1), opt, options, sim);
  EXPECT_TRUE(b.ok()) << b.status();
  return *std::move(b);
}

// Launch-gated share of the device's step time over 30 steps of a backend.
double GatedShareOfOneRun(const SimBackendOptions& sim) {
  const testing::Dataset d = testing::MakeDataset(8, 784, 10, 0.5, 3);
  auto backend = MakeSim(sim, 8);
  MeasuredBackend measured(backend.get(), /*compute_free=*/false, /*delay_us=*/0,
                           /*keep_spans=*/false);
  for (int s = 0; s < 30; ++s) {
    EXPECT_TRUE(measured.TrainStep(testing::U8Batch(d, 0, 8, 784), 0.01f).ok());
  }
  const ComputeStats& stats = measured.stats();
  EXPECT_GT(stats.busy_ns, 0);
  return static_cast<double>(stats.launch_gated_ns) / std::max<int64_t>(1, stats.busy_ns);
}

// Up to three runs, the first that lies on the expected side of `bound` (another process
// delaying the stream's thread can blur one run; a wrong measurement misses all three).
double GatedShare(const SimBackendOptions& sim, bool expect_above, double bound) {
  double share = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    share = GatedShareOfOneRun(sim);
    if (expect_above ? share >= bound : share <= bound) break;
  }
  return share;
}

// A step enqueued as 20 launches of 200 us of host time each on a device that needs ~10 us per
// launch: the start event is reached at once and the device waits for every launch inside the
// step, so nearly all of its step time is gated by the host.
TEST(MeasuredBackendTest, DeviceWaitingForLaunchesInsideAStepIsLaunchGated) {
  SimBackendOptions sim;
  sim.compute_ns_per_step = 200'000;
  sim.launches_per_step = 20;
  sim.launch_host_ns = 200'000;
  EXPECT_GE(GatedShare(sim, /*expect_above=*/true, 0.6), 0.6);
}

// One launch of 5 ms of device work: the device computes after the host enqueued the step.
TEST(MeasuredBackendTest, DeviceComputingAfterTheEnqueueIsNotLaunchGated) {
  SimBackendOptions sim;
  sim.compute_ns_per_step = 5'000'000;
  EXPECT_LE(GatedShare(sim, /*expect_above=*/false, 0.3), 0.3);
}

// An injected compute delay holds the compute stream on the device (Stream::Delay), not with a
// spinning host callback: the simulated device runs the callbacks of all its streams one at a
// time (as CUDA may), and an upload's completion callback on another stream is not held.
TEST(MeasuredBackendTest, InjectedDelayOnADeviceDoesNotHoldOtherStreamsCallbacks) {
  const testing::Dataset d = testing::MakeDataset(8, 784, 10, 0.5, 4);
  auto backend = MakeSim({}, 8);
  constexpr int64_t kDelayUs = 200'000;  // a callback held by it would wait 190 ms
  MeasuredBackend measured(backend.get(), /*compute_free=*/false, kDelayUs, /*keep_spans=*/false);
  auto upload = *backend->device()->CreateStream();
  ASSERT_TRUE(measured.TrainStep(testing::U8Batch(d, 0, 8, 784), 0.01f).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the step is in its delay
  std::atomic<int64_t> done_ns{0};
  const int64_t t0 = NowNs();
  ASSERT_TRUE(upload->AddCallback([&] { done_ns = NowNs(); }).ok());
  ASSERT_TRUE(upload->Synchronize().ok());
  EXPECT_LT(done_ns - t0, 100'000'000) << "the upload's callback waited for the compute delay";
  const ComputeStats& stats = measured.stats();
  EXPECT_GE(stats.busy_ns, kDelayUs * 1000);  // the delay is inside the step's events
}

}  // namespace
}  // namespace sluice
