#include "pipeline/internal/order_planner.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "gtest/gtest.h"

namespace sluice::pipeline_internal {
namespace {

SplitLayout Layout(std::vector<uint32_t> frame_sizes) {
  SplitLayout l;
  uint64_t first = 0;
  for (uint32_t i = 0; i < frame_sizes.size(); ++i) {
    l.frames.push_back(FrameRef{0, i, first, frame_sizes[i]});
    first += frame_sizes[i];
  }
  l.record_count = first;
  return l;
}

TEST(OrderPlanner, IsAPermutationAndAPureFunctionOfSeedAndEpoch) {
  const SplitLayout l = Layout({10, 10, 10, 10, 10, 3, 10, 10, 7});
  OrderOptions o{7, true, 3, 8, false};
  auto a = PlanEpoch(l, o, 0, 0);
  auto b = PlanEpoch(l, o, 0, 0);
  auto c = PlanEpoch(l, o, 1, 0);
  o.seed = 8;
  auto d = PlanEpoch(l, o, 0, 0);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->order, b->order);
  EXPECT_NE(a->order, c->order);
  EXPECT_NE(a->order, d->order);
  std::vector<uint32_t> sorted = a->order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint32_t> all(l.record_count);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
}

TEST(OrderPlanner, WindowsKeepSamplesNearTheirFrames) {
  const SplitLayout l = Layout(std::vector<uint32_t>(12, 8));
  OrderOptions o{1, true, 2, 4, false};
  auto p = PlanEpoch(l, o, 0, 0);
  ASSERT_TRUE(p.ok());
  // Each run of 16 positions (a window) holds exactly the records of two frames.
  for (uint32_t w = 0; w < 6; ++w) {
    std::set<uint32_t> frames;
    for (uint32_t i = w * 16; i < (w + 1) * 16; ++i) frames.insert(p->order[i] / 8);
    EXPECT_EQ(frames.size(), 2u) << "window " << w;
  }
}

TEST(OrderPlanner, ShuffleOffIsFileOrder) {
  const SplitLayout l = Layout({5, 5, 2});
  auto p = PlanEpoch(l, OrderOptions{3, false, 1, 4, false}, 4, 0);
  ASSERT_TRUE(p.ok());
  for (uint32_t i = 0; i < 12; ++i) EXPECT_EQ(p->order[i], i);
  EXPECT_EQ(p->num_batches(), 3u);
  EXPECT_EQ(p->batch_end(2) - p->batch_begin(2), 4u);
}

TEST(OrderPlanner, DropLastAndPartialLastBatch) {
  const SplitLayout l = Layout({10, 10, 3});
  EXPECT_EQ(StepsPerEpoch(23, OrderOptions{0, true, 0, 5, false}), 5u);
  EXPECT_EQ(StepsPerEpoch(23, OrderOptions{0, true, 0, 5, true}), 4u);
  auto p = PlanEpoch(l, OrderOptions{0, true, 0, 5, true}, 0, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->order.size(), 20u);
  auto q = PlanEpoch(l, OrderOptions{0, true, 0, 5, false}, 0, 0);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->batch_end(4) - q->batch_begin(4), 3u);
}

TEST(OrderPlanner, ResumedPlanIsTheTailAndReadsOnlyNeededFrames) {
  const SplitLayout l = Layout(std::vector<uint32_t>(10, 6));
  const OrderOptions o{5, true, 2, 6, false};
  auto full = PlanEpoch(l, o, 2, 0);
  ASSERT_TRUE(full.ok());
  for (uint64_t k = 0; k <= 10; ++k) {
    auto tail = PlanEpoch(l, o, 2, k);
    ASSERT_TRUE(tail.ok());
    ASSERT_TRUE(std::equal(tail->order.begin(), tail->order.end(), full->order.begin() + k * 6));
    std::set<uint32_t> needed;
    for (uint32_t r : tail->order) needed.insert(r / 6);
    EXPECT_EQ(tail->read_frames.size(), needed.size());
    for (uint32_t f : tail->read_frames) EXPECT_TRUE(needed.count(f));
  }
  EXPECT_FALSE(PlanEpoch(l, o, 2, 11).ok());
}

TEST(OrderPlanner, SlotsAndBatchesAgree) {
  const SplitLayout l = Layout({7, 7, 7, 7, 7, 7, 7, 2});
  auto p = PlanEpoch(l, OrderOptions{9, true, 3, 5, false}, 0, 0);
  ASSERT_TRUE(p.ok());
  for (uint32_t i = 0; i < p->order.size(); ++i) {
    const uint32_t frame = p->read_frames[p->sample_slot[i]];
    EXPECT_EQ(l.frames[frame].first_record + p->sample_offset[i], p->order[i]);
  }
  for (uint32_t b = 0; b < p->num_batches(); ++b) {
    for (uint32_t j = p->batch_slot_begin[b]; j < p->batch_slot_begin[b + 1]; ++j) {
      const uint32_t s = p->batch_slots[j];
      const auto first = p->slot_batches.begin() + p->slot_batch_begin[s];
      const auto last = p->slot_batches.begin() + p->slot_batch_begin[s + 1];
      EXPECT_NE(std::find(first, last, b), last);
    }
  }
}

TEST(OrderPlanner, FramesAliveBoundCoversEveryEpochAndStart) {
  for (uint32_t window : {0u, 1u, 2u, 5u}) {
    for (uint32_t batch : {1u, 3u, 16u, 40u}) {
      for (bool shuffle : {false, true}) {
        const SplitLayout l = Layout({16, 16, 16, 16, 5, 16, 16, 16, 9, 16, 16, 3});
        const OrderOptions o{11, shuffle, window, batch, false};
        const uint32_t bound = FramesAliveBound(l, o);
        for (uint64_t e = 0; e < 4; ++e) {
          for (uint64_t k : {0u, 1u, 2u}) {
            auto p = PlanEpoch(l, o, e, k);
            ASSERT_TRUE(p.ok());
            EXPECT_LE(p->min_frames_alive, bound)
                << "W " << window << " B " << batch << " shuffle " << shuffle;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace sluice::pipeline_internal
