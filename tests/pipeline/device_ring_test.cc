#include "pipeline/internal/device_ring.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {
namespace {

// Logs the ring's callbacks as "enqueue <id>@<slot>" and "release <slot>".
struct Log {
  std::vector<std::string> events;
  std::vector<uint64_t> enqueued;
  DeviceRing::EnqueueFn Enqueue() {
    return [this](const BatchMsg& b, uint32_t slot, int64_t waited_ns) {
      EXPECT_GE(waited_ns, 0);
      events.push_back("enqueue " + std::to_string(b.id) + "@" + std::to_string(slot));
      enqueued.push_back(b.id);
    };
  }
  DeviceRing::ReleaseSlotFn ReleaseSlot() {
    return [this](uint32_t slot, device::Stream*) {
      events.push_back("release " + std::to_string(slot));
    };
  }
};

BatchMsg Batch(uint64_t id) {
  BatchMsg m;
  m.id = id;
  return m;
}

// Any non-null stream: the ring only passes it on.
device::Stream* FakeStream() { return reinterpret_cast<device::Stream*>(uintptr_t{0x1000}); }

TEST(DeviceRing, NeverAdmitsABatchPastLowestUnreleasedPlusDepth) {
  std::atomic<bool> cancelled{false};
  Log log;
  DeviceRing ring(2, &cancelled, log.Enqueue(), log.ReleaseSlot());
  EXPECT_EQ(ring.Submit(Batch(0)), 0u);
  EXPECT_EQ(ring.Submit(Batch(1)), 0u);
  EXPECT_EQ(ring.Submit(Batch(2)), 1u) << "2 >= 0 + depth: slot 0 still holds batch 0";
  EXPECT_EQ(ring.Submit(Batch(3)), 2u) << "uploads start in order: 3 waits behind 2";
  EXPECT_EQ(log.enqueued, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(ring.waiting(), 2u);
}

TEST(DeviceRing, OutOfOrderReleasesAdvanceOnlyPastTheLowest) {
  std::atomic<bool> cancelled{false};
  Log log;
  DeviceRing ring(2, &cancelled, log.Enqueue(), log.ReleaseSlot());
  for (uint64_t id = 0; id < 4; ++id) ring.Submit(Batch(id));
  ASSERT_EQ(log.enqueued, (std::vector<uint64_t>{0, 1}));
  ring.Release(1, ring.SlotOf(1), FakeStream());
  EXPECT_EQ(ring.lowest_unreleased(), 0u) << "0 is not released yet";
  EXPECT_EQ(log.enqueued, (std::vector<uint64_t>{0, 1}))
      << "3 would reuse 1's slot while 0 holds the ring's head";
  ring.Release(0, ring.SlotOf(0), FakeStream());
  EXPECT_EQ(ring.lowest_unreleased(), 2u) << "releasing 0 also counts the earlier release of 1";
  EXPECT_EQ(log.enqueued, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(ring.waiting(), 0u);
}

TEST(DeviceRing, SlotIsReleasedBeforeTheBatchItUnblocksIsEnqueued) {
  std::atomic<bool> cancelled{false};
  Log log;
  DeviceRing ring(1, &cancelled, log.Enqueue(), log.ReleaseSlot());
  ring.Submit(Batch(0));
  ring.Submit(Batch(1));
  ring.Release(0, ring.SlotOf(0), FakeStream());
  EXPECT_EQ(log.events, (std::vector<std::string>{"enqueue 0@0", "release 0", "enqueue 1@0"}));
}

TEST(DeviceRing, ReleaseWithoutStreamSkipsTheDeviceReleaseButFreesTheSlot) {
  std::atomic<bool> cancelled{false};
  Log log;
  DeviceRing ring(1, &cancelled, log.Enqueue(), log.ReleaseSlot());
  ring.Submit(Batch(0));
  ring.Submit(Batch(1));
  ring.Release(0, 0, nullptr);  // e.g. an all-skipped batch that never used its slot
  EXPECT_EQ(log.events, (std::vector<std::string>{"enqueue 0@0", "enqueue 1@0"}));
}

TEST(DeviceRing, CancelledRingStartsNoWaitingBatch) {
  std::atomic<bool> cancelled{false};
  Log log;
  DeviceRing ring(1, &cancelled, log.Enqueue(), log.ReleaseSlot());
  ring.Submit(Batch(0));
  ring.Submit(Batch(1));
  cancelled.store(true);
  ring.Release(0, 0, FakeStream());
  EXPECT_EQ(log.enqueued, (std::vector<uint64_t>{0}));
  EXPECT_EQ(ring.lowest_unreleased(), 1u) << "the release itself still counts";
  ring.Clear();
  EXPECT_EQ(ring.waiting(), 0u);
}

// The ring's blocked span: wall time during which a batch waited for a slot, counted once
// however many waited, closed when the last waiting batch starts.
TEST(DeviceRing, BlockedSpanIsTheTimeSomeBatchWaitedForASlot) {
  std::atomic<bool> cancelled{false};
  Log log;
  DeviceRing ring(1, &cancelled, log.Enqueue(), log.ReleaseSlot());
  ring.Submit(Batch(0));
  EXPECT_EQ(ring.blocked_ns(NowNs()), 0);
  ring.Submit(Batch(1));
  ring.Submit(Batch(2));
  const int64_t later = NowNs() + 1'000'000'000;
  EXPECT_GE(ring.blocked_ns(later), 1'000'000'000);
  EXPECT_LT(ring.blocked_ns(later), 2'000'000'000);
  ring.Release(0, 0, FakeStream());  // 1 starts, 2 waits
  ring.Release(1, 0, FakeStream());  // 2 starts: closed
  const int64_t closed = ring.blocked_ns(NowNs());
  EXPECT_GT(closed, 0);
  EXPECT_EQ(ring.blocked_ns(later), closed);
  EXPECT_EQ(log.enqueued, (std::vector<uint64_t>{0, 1, 2}));
}

}  // namespace
}  // namespace sluice::pipeline_internal
