#include "engine/job/autotune.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

// One epoch of 60,000 samples in 1 s: compute busy for `compute_busy_s`, the consumer waited
// `wait_s` (after a 10 ms start-up), and each stage busy as given (2 threads for the parallel
// ones).
struct EpochRun {
  PipelineStats stats;
  ComputeStats compute;
  double seconds = 1.0;
};

EpochRun MakeRun(double wait_s, double read_busy_s, double decompress_busy_s,
                 double preprocess_busy_s, double compute_busy_s) {
  EpochRun r;
  r.stats.start_ns = 1'000'000'000;
  r.stats.pool_buffers = 16;
  auto set = [&](Stage s, int conc, double busy_s) {
    StageStats& st = r.stats.stages[static_cast<int>(s)];
    st.stage = s;
    st.concurrency = conc;
    st.items = 1000;
    st.samples = 60000;
    st.busy_ns = static_cast<int64_t>(busy_s * 1e9);
  };
  set(Stage::kRead, 1, read_busy_s);
  set(Stage::kDecompress, 1, decompress_busy_s);
  set(Stage::kPreprocess, 1, preprocess_busy_s);
  StageStats& d = r.stats.stages[static_cast<int>(Stage::kDelivery)];
  d.first_start_ns = r.stats.start_ns + 10'000'000;  // 10 ms start-up
  d.wait_input_ns = static_cast<int64_t>((wait_s + 0.010) * 1e9);
  r.compute.samples = 60000;
  r.compute.busy_ns = static_cast<int64_t>(compute_busy_s * 1e9);
  return r;
}

PipelineResources Current() {
  PipelineResources o;
  o.threads = 2;
  o.decompress_threads = 1;
  o.preprocess_threads = 1;
  o.read_ahead_frames = 4;
  o.pool_size = 16;
  return o;
}

TEST(AutotuneTest, PipelineThatKeepsUpIsLeftAlone) {
  EpochRun r = MakeRun(0.01, 0.05, 0.1, 0.1, 0.9);
  AutotuneDecision d = Autotune(Current(), r.stats, r.compute, r.seconds, {}, 100352);
  EXPECT_FALSE(d.changed);
  ASSERT_EQ(d.reasons.size(), 1u);
  EXPECT_NE(d.reasons[0].find("keeps up"), std::string::npos);
}

TEST(AutotuneTest, SlowDecompressGetsMoreThreadsWithinTheCpuBudget) {
  EpochRun r = MakeRun(0.4, 0.05, 0.9, 0.1, 0.5);
  AutotuneBudget budget;
  budget.cpu_threads = 2;
  AutotuneDecision d = Autotune(Current(), r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.resources.decompress_threads, 2);
  EXPECT_EQ(d.resources.preprocess_threads, 1);
  EXPECT_NE(d.reasons[0].find("decompress concurrency 1 -> 2"), std::string::npos) << d.reasons[0];
  // At the budget already: nothing more to give, and it says so.
  r.stats.stages[static_cast<int>(Stage::kDecompress)].concurrency = 2;
  r.stats.stages[static_cast<int>(Stage::kDecompress)].busy_ns = 1'800'000'000;
  d = Autotune(Current(), r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_FALSE(d.changed);
  EXPECT_NE(d.reasons[0].find("whole CPU budget"), std::string::npos) << d.reasons[0];
}

TEST(AutotuneTest, SlowReadGetsMoreReadAhead) {
  EpochRun r = MakeRun(0.4, 0.9, 0.1, 0.1, 0.5);
  AutotuneDecision d = Autotune(Current(), r.stats, r.compute, r.seconds, {}, 100352);
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.resources.read_ahead_frames, 8u);
}

TEST(AutotuneTest, StallsWithFastStagesDoubleThePoolWithinTheMemoryBudget) {
  EpochRun r = MakeRun(0.2, 0.05, 0.1, 0.1, 0.7);
  AutotuneBudget budget;
  budget.memory_bytes = 64 * 100352;  // room for 64 buffers
  AutotuneDecision d = Autotune(Current(), r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.resources.pool_size, 32u);
  r.stats.pool_buffers = 48;  // doubling would pass the budget: capped at 64
  d = Autotune(Current(), r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_EQ(d.resources.pool_size, 64u);
  r.stats.pool_buffers = 64;  // at the budget: kept
  d = Autotune(Current(), r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_FALSE(d.changed);
  EXPECT_NE(d.reasons[0].find("memory budget"), std::string::npos) << d.reasons[0];
}

// A device run whose copies waited for a ring slot longer than they copied: the ring doubles
// (not the pool), within the device memory budget and kMaxDeviceRingDepth.
TEST(AutotuneTest, CopiesWaitingForRingSlotsDoubleTheRingWithinItsBudgets) {
  EpochRun r = MakeRun(0.2, 0.05, 0.1, 0.1, 0.7);
  r.stats.ring_depth = 3;
  StageStats& h2d = r.stats.stages[static_cast<int>(Stage::kH2D)];
  h2d.items = 1000;
  h2d.samples = 60000;
  h2d.busy_ns = 100'000'000;
  h2d.wait_output_ns = 150'000'000;
  AutotuneBudget budget;
  budget.device_memory_bytes = 10 * 100352;  // room for 10 slots
  PipelineResources current = Current();
  current.device_ring_depth = 3;
  AutotuneDecision d = Autotune(current, r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.resources.device_ring_depth, 6u);
  EXPECT_EQ(d.resources.pool_size, 16u) << "the pool is not what held the copies back";
  EXPECT_NE(d.reasons[0].find("device ring 3 -> 6"), std::string::npos) << d.reasons[0];
  r.stats.ring_depth = 6;  // doubling would pass the budget: capped at 10 slots
  d = Autotune(current, r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_EQ(d.resources.device_ring_depth, 10u);
  r.stats.ring_depth = 10;  // at the budget: kept
  d = Autotune(current, r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_FALSE(d.changed);
  EXPECT_NE(d.reasons[0].find("device memory budget"), std::string::npos) << d.reasons[0];
  budget.device_memory_bytes = uint64_t{1} << 40;  // memory to spare: the flag's bound holds
  r.stats.ring_depth = 48;
  d = Autotune(current, r.stats, r.compute, r.seconds, budget, 100352);
  EXPECT_EQ(d.resources.device_ring_depth, kMaxDeviceRingDepth);
}

// Copies that waited for a slot less than they copied are a busy link, not a short ring.
TEST(AutotuneTest, CopiesThatBarelyWaitedForSlotsLeaveTheRingAlone) {
  EpochRun r = MakeRun(0.2, 0.05, 0.1, 0.1, 0.7);
  r.stats.ring_depth = 3;
  StageStats& h2d = r.stats.stages[static_cast<int>(Stage::kH2D)];
  h2d.items = 1000;
  h2d.busy_ns = 100'000'000;
  h2d.wait_output_ns = 50'000'000;
  PipelineResources current = Current();
  current.device_ring_depth = 3;
  AutotuneDecision d = Autotune(current, r.stats, r.compute, r.seconds, {}, 100352);
  EXPECT_EQ(d.resources.device_ring_depth, 3u);
  EXPECT_EQ(d.resources.pool_size, 32u) << d.reasons[0];
}

TEST(AutotuneTest, StartupWaitIsNotCountedAsAStall) {
  // All of the wait is the first batch's: nothing to tune.
  EpochRun r = MakeRun(0.0, 0.05, 0.1, 0.1, 0.9);
  r.stats.stages[static_cast<int>(Stage::kDelivery)].wait_input_ns = 200'000'000;
  r.stats.stages[static_cast<int>(Stage::kDelivery)].first_start_ns =
      r.stats.start_ns + 200'000'000;
  AutotuneDecision d = Autotune(Current(), r.stats, r.compute, r.seconds, {}, 100352);
  EXPECT_FALSE(d.changed) << d.reasons[0];
}

}  // namespace
}  // namespace sluice
