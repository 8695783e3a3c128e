// PoolCache (pipeline/pool_cache.h): a pipeline built after another one finished takes its
// batch and frame pools instead of allocating them, and delivers the same batches; pipelines
// alive together, or of another shape, allocate their own.
#include "pipeline/pool_cache.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "tests/pipeline/test_util.h"

namespace sluice {
namespace {

using testing::Batch;
using testing::RunAll;
using testing::TestDataset;

PipelineOptions ShuffledOptions() {
  PipelineOptions o;
  o.order.batch_size = 16;
  o.order.seed = 7;
  o.order.shuffle = true;
  o.order.shuffle_window_frames = 3;
  o.format.h2d_format = H2DFormat::kF32;
  o.resources.threads = 2;
  o.resources.pool_size = 3;
  o.span.epochs = 1;
  return o;
}

TEST(PoolCache, NextPipelineReusesTheFinishedOnesPoolsAndDeliversTheSameBatches) {
  TestDataset data(500, 200, 10);
  PipelineOptions o = ShuffledOptions();
  auto reference = RunAll(data.dataset.get(), o);  // no cache
  ASSERT_TRUE(reference.ok()) << reference.status();

  auto cache = std::make_shared<PoolCache>();
  o.resources.pool_cache = cache;
  for (uint64_t pass = 0; pass < 3; ++pass) {
    auto got = RunAll(data.dataset.get(), o);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *reference) << "pass " << pass;
    // Each pass after the first takes the batch pool and both frame pools (stored, decoded).
    EXPECT_EQ(cache->reuses(), 3 * pass) << "pass " << pass;
  }
}

TEST(PoolCache, PipelinesAliveTogetherAllocateTheirOwn) {
  TestDataset data(300, 300, 10);
  PipelineOptions o = ShuffledOptions();
  auto cache = std::make_shared<PoolCache>();
  o.resources.pool_cache = cache;
  auto first = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(cache->reuses(), 0u);
  BatchLease a, b;
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE(*(*first)->Next(&a));
    ASSERT_TRUE(*(*second)->Next(&b));
    EXPECT_EQ(testing::ToBatch(a.view()), testing::ToBatch(b.view())) << "step " << step;
    EXPECT_NE(a.view().samples, b.view().samples) << "two live pipelines share a buffer";
  }
}

TEST(PoolCache, AnotherBatchShapeTakesOnlyTheFramePools) {
  TestDataset data(300, 300, 10);
  PipelineOptions o = ShuffledOptions();
  auto cache = std::make_shared<PoolCache>();
  o.resources.pool_cache = cache;
  ASSERT_TRUE(RunAll(data.dataset.get(), o).ok());
  o.order.batch_size = 32;  // larger batch buffers: the cached batch pool does not fit
  auto reference = RunAll(data.dataset.get(), [&] {
    PipelineOptions plain = o;
    plain.resources.pool_cache = nullptr;
    return plain;
  }());
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto got = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *reference);
  EXPECT_EQ(cache->reuses(), 2u);  // the two frame pools only
}

TEST(PoolCache, APassCutShortLeavesTheNextPassCorrect) {
  TestDataset data(500, 200, 10);
  PipelineOptions o = ShuffledOptions();
  auto reference = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto cache = std::make_shared<PoolCache>();
  o.resources.pool_cache = cache;
  for (int round = 0; round < 3; ++round) {
    auto p = Pipeline::Create(data.dataset.get(), o);
    ASSERT_TRUE(p.ok()) << p.status();
    BatchLease lease;
    for (int i = 0; i <= round * 5; ++i) ASSERT_TRUE(*(*p)->Next(&lease));
    lease.Release();
    (*p)->Cancel();
    p->reset();  // frames still in flight: whatever is given back must be whole and idle
    auto got = RunAll(data.dataset.get(), o);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *reference) << "round " << round;
  }
}

}  // namespace
}  // namespace sluice
