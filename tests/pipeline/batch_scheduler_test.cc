#include "pipeline/internal/batch_scheduler.h"

#include <atomic>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {
namespace {

// Records dispatches and checks the grant rule at each one: after the grant, at least one
// buffer is left for every lower batch not yet dispatched.
class Recorder {
 public:
  explicit Recorder(uint64_t buffers) : buffers_(buffers) {}
  BatchScheduler::DispatchFn Fn() {
    return [this](const ReadyBatch& b, int64_t now_ns) {
      ++granted_;
      uint64_t lower_undispatched = 0;
      for (uint64_t id = 0; id < b.id; ++id) lower_undispatched += dispatched_.count(id) == 0;
      EXPECT_GE(buffers_ - granted_, lower_undispatched)
          << "batch " << b.id << " took a buffer a lower undispatched batch needs";
      EXPECT_GE(now_ns, b.ready_ns);
      dispatched_.insert(b.id);
      order.push_back(b.id);
    };
  }
  void Returned() { --granted_; }
  std::vector<uint64_t> order;

 private:
  const uint64_t buffers_;
  uint64_t granted_ = 0;
  std::set<uint64_t> dispatched_;
};

void Add(BatchScheduler& s, uint64_t id) {
  std::vector<ReadyBatch> v = {ReadyBatch{id, 0, nullptr, static_cast<uint32_t>(id)}};
  s.AddReady(&v);
  EXPECT_TRUE(v.empty());
}

TEST(BatchScheduler, LaterBatchesNeverTakeTheBuffersTheEarliestNeeds) {
  std::atomic<bool> cancelled{false};
  Recorder rec(2);
  BatchScheduler s(2, &cancelled, rec.Fn());
  Add(s, 3);
  Add(s, 2);
  EXPECT_TRUE(rec.order.empty()) << "3 and 2 would leave no buffer for 0 and 1";
  Add(s, 1);
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{1})) << "1 leaves one buffer for 0";
  Add(s, 0);
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(s.outstanding(), 2u);
  EXPECT_EQ(s.waiting(), 2u);
  rec.Returned();
  s.ReturnBuffer();
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{1, 0, 2})) << "returns grant in id order";
  rec.Returned();
  s.ReturnBuffer();
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{1, 0, 2, 3}));
  EXPECT_EQ(s.waiting(), 0u);
}

TEST(BatchScheduler, SingleBufferGoesToTheLowestBatchNotTheFirstReady) {
  std::atomic<bool> cancelled{false};
  Recorder rec(1);
  BatchScheduler s(1, &cancelled, rec.Fn());
  Add(s, 1);
  EXPECT_TRUE(rec.order.empty()) << "1 must not take the only buffer while 0 is missing";
  Add(s, 0);
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{0}));
  rec.Returned();
  s.ReturnBuffer();
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{0, 1}));
}

TEST(BatchScheduler, ReadyInOrderDispatchesUpToThePoolSize) {
  std::atomic<bool> cancelled{false};
  Recorder rec(3);
  BatchScheduler s(3, &cancelled, rec.Fn());
  std::vector<ReadyBatch> v;
  for (uint64_t id = 0; id < 5; ++id) v.push_back(ReadyBatch{id, 0, nullptr, 0});
  EXPECT_EQ(s.AddReady(&v), 5u) << "AddReady reports the batches waiting before dispatch";
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(s.outstanding(), 3u);
  rec.Returned();
  s.ReturnBuffer();
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST(BatchScheduler, NothingIsDispatchedAfterShutdownOrCancel) {
  std::atomic<bool> cancelled{false};
  Recorder rec(4);
  BatchScheduler s(4, &cancelled, rec.Fn());
  s.Shutdown();
  std::vector<ReadyBatch> v = {ReadyBatch{0, 0, nullptr, 0}};
  EXPECT_EQ(s.AddReady(&v), 0u);
  EXPECT_TRUE(v.empty());
  EXPECT_TRUE(rec.order.empty());

  std::atomic<bool> cancelled2{false};
  Recorder rec2(1);
  BatchScheduler s2(1, &cancelled2, rec2.Fn());
  Add(s2, 0);
  Add(s2, 1);
  ASSERT_EQ(rec2.order, (std::vector<uint64_t>{0}));
  cancelled2.store(true);
  s2.ReturnBuffer();
  EXPECT_EQ(rec2.order, (std::vector<uint64_t>{0}))
      << "cancelled: the returned buffer is not re-granted";
  EXPECT_EQ(s2.outstanding(), 0u) << "the returned buffer is still counted back";
}

// The blocked span is wall time during which a ready batch waited for a buffer: it opens when
// a batch cannot get one, grows while it waits, and closes when the last waiting batch is
// dispatched; batches waiting together count once.
TEST(BatchScheduler, BlockedSpanIsTheTimeSomeBatchWaitedCountedOnce) {
  std::atomic<bool> cancelled{false};
  Recorder rec(1);
  BatchScheduler s(1, &cancelled, rec.Fn());
  Add(s, 0);  // takes the only buffer at once
  EXPECT_EQ(s.blocked_ns(NowNs()), 0);
  Add(s, 1);
  Add(s, 2);  // two wait together
  const int64_t later = NowNs() + 1'000'000'000;
  const int64_t open = s.blocked_ns(later);
  EXPECT_GE(open, 1'000'000'000);                    // still waiting: it runs up to `later`
  EXPECT_LT(open, 1'000'000'000 + 1'000'000'000LL);  // once, not twice (two batches)
  rec.Returned();
  s.ReturnBuffer();  // 1 goes, 2 still waits
  rec.Returned();
  s.ReturnBuffer();  // 2 goes: the span closes
  const int64_t closed = s.blocked_ns(NowNs());
  EXPECT_GT(closed, 0);
  EXPECT_EQ(s.blocked_ns(later), closed);  // closed: no longer grows
  EXPECT_EQ(rec.order, (std::vector<uint64_t>{0, 1, 2}));
}

// With at most one dispatched batch not started, a ready batch waits for a thread: it is
// dispatched when the one before it starts, its wait for a buffer restarts then, and no
// blocked span opens while buffers are free.
TEST(BatchScheduler, BatchesBeyondTheThreadsWaitForAThreadNotABuffer) {
  std::atomic<bool> cancelled{false};
  std::vector<int64_t> ready_at_dispatch;
  std::vector<uint64_t> order;
  BatchScheduler s(
      8, &cancelled,
      [&](const ReadyBatch& b, int64_t) {
        order.push_back(b.id);
        ready_at_dispatch.push_back(b.ready_ns);
      },
      /*max_not_started=*/1);
  std::vector<ReadyBatch> v = {ReadyBatch{0, 1, nullptr, 0}, ReadyBatch{1, 1, nullptr, 1},
                               ReadyBatch{2, 1, nullptr, 2}};
  s.AddReady(&v);
  EXPECT_EQ(order, (std::vector<uint64_t>{0}));  // 1 and 2 wait for a thread
  EXPECT_EQ(s.waiting(), 2u);
  EXPECT_EQ(s.outstanding(), 1u);       // no buffer held for them
  EXPECT_EQ(s.blocked_ns(NowNs()), 0);  // buffers are free: not blocked on the pool
  const int64_t before_start = NowNs();
  s.Started();  // 0 started: 1 goes
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 1}));
  s.Started();
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 1, 2}));
  // 0 waited for nothing; 1 and 2 waited for a thread, so their ready time restarted.
  EXPECT_EQ(ready_at_dispatch[0], 1);
  EXPECT_GE(ready_at_dispatch[1], before_start - 1'000'000'000);
  EXPECT_GT(ready_at_dispatch[1], 1);
  EXPECT_GT(ready_at_dispatch[2], 1);
  EXPECT_EQ(s.blocked_ns(NowNs()), 0);
}

}  // namespace
}  // namespace sluice::pipeline_internal
