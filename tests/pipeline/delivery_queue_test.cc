#include "pipeline/internal/delivery_queue.h"

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace sluice::pipeline_internal {
namespace {

BatchMsg Batch(uint64_t id, uint32_t size = 1, bool is_last = false) {
  BatchMsg m;
  m.id = id;
  m.is_last = is_last;
  m.payload = std::make_shared<BatchPayload>();
  m.payload->size = size;
  return m;
}

// Starts a consumer blocked in Pop(), long enough to be past its yields and asleep.
std::future<absl::StatusOr<bool>> SleepingConsumer(DeliveryQueue& q, BatchMsg* out) {
  auto f = std::async(std::launch::async, [&q, out] { return q.Pop(8, out, nullptr); });
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "Pop() returned with nothing delivered";
  return f;
}

TEST(DeliveryQueue, PopsInPushOrderAndCountsWhatItHandsOut) {
  DeliveryQueue q;
  q.Push(Batch(0, 3), true);
  q.Push(Batch(1, 0), false);  // an all-skipped batch is not delivered
  EXPECT_EQ(q.Push(Batch(2, 4, /*is_last=*/true), true), 2u);
  BatchMsg m;
  DeliveryQueue::Wait wait;
  ASSERT_EQ(q.Pop(8, &m, &wait).value(), true);
  EXPECT_EQ(m.id, 0u);
  EXPECT_GE(wait.end_ns, wait.start_ns);
  ASSERT_EQ(q.Pop(8, &m, nullptr).value(), true);
  EXPECT_EQ(m.id, 2u);
  EXPECT_EQ(q.Pop(8, &m, nullptr).value(), false) << "the last batch ends the stream";
  const DeliveryQueue::Counters c = q.counters();
  EXPECT_EQ(c.batches_delivered, 2u);
  EXPECT_EQ(c.samples_delivered, 7u);
}

TEST(DeliveryQueue, SkippedLastBatchStillEndsTheStream) {
  DeliveryQueue q;
  q.Push(Batch(0, 0, /*is_last=*/true), false);
  BatchMsg m;
  EXPECT_EQ(q.Pop(8, &m, nullptr).value(), false);
}

TEST(DeliveryQueue, PastDeadlineIsDeadlineExceededAndConsumesNothing) {
  DeliveryQueue q;
  BatchMsg m;
  DeliveryQueue::Wait wait;
  const auto past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  EXPECT_TRUE(absl::IsDeadlineExceeded(q.Pop(8, &m, &wait, past).status()));
  EXPECT_GE(wait.end_ns, wait.start_ns) << "the wait is still measured";
  q.Push(Batch(0, 3, /*is_last=*/true), true);
  // Ready work is handed out even when the deadline has passed.
  ASSERT_EQ(q.Pop(8, &m, nullptr, past).value(), true);
  EXPECT_EQ(m.id, 0u);
  EXPECT_EQ(q.Pop(8, &m, nullptr, past).value(), false);
  EXPECT_EQ(q.counters().batches_delivered, 1u);
}

TEST(DeliveryQueue, PushWakesAConsumerWaitingWithADeadline) {
  DeliveryQueue q;
  BatchMsg m;
  auto f = std::async(std::launch::async, [&q, &m] {
    return q.Pop(8, &m, nullptr, std::chrono::steady_clock::now() + std::chrono::hours(1));
  });
  ASSERT_EQ(f.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  q.Push(Batch(5), true);
  ASSERT_EQ(f.get().value(), true);
  EXPECT_EQ(m.id, 5u);
}

TEST(DeliveryQueue, PushWakesASleepingConsumer) {
  DeliveryQueue q;
  BatchMsg m;
  auto f = SleepingConsumer(q, &m);
  q.Push(Batch(7), true);
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the push did not wake the consumer";
    q.Cancel();
  }
  absl::StatusOr<bool> r = f.get();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(m.id, 7u);
}

TEST(DeliveryQueue, FailWakesASleepingConsumerWithTheFirstError) {
  DeliveryQueue q;
  BatchMsg m;
  auto f = SleepingConsumer(q, &m);
  q.Fail(absl::DataLossError("first"));
  q.Fail(absl::InternalError("second"));
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the failure did not wake the consumer";
    q.Push(Batch(0), true);
  }
  absl::StatusOr<bool> r = f.get();
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_EQ(r.status().message(), "first");
  q.Cancel();
  EXPECT_TRUE(absl::IsDataLoss(q.Pop(8, &m, nullptr).status()))
      << "the error outranks cancellation";
}

TEST(DeliveryQueue, CancelWakesASleepingConsumer) {
  DeliveryQueue q;
  BatchMsg m;
  auto f = SleepingConsumer(q, &m);
  q.Cancel();
  if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the cancellation did not wake the consumer";
    q.Push(Batch(0), true);
  }
  EXPECT_TRUE(absl::IsCancelled(f.get().status()));
}

TEST(DeliveryQueue, ConsumerHoldingTooManyLeasesIsRefusedUntilOneIsReturned) {
  DeliveryQueue q;
  for (uint64_t id = 0; id < 3; ++id) q.Push(Batch(id, 2), true);
  BatchMsg a, b, c;
  ASSERT_TRUE(q.Pop(2, &a, nullptr).value());
  ASSERT_TRUE(q.Pop(2, &b, nullptr).value());
  DeliveryQueue::Wait wait;
  EXPECT_TRUE(absl::IsFailedPrecondition(q.Pop(2, &c, &wait).status()));
  EXPECT_EQ(wait.end_ns, 0) << "a refused Pop() did not wait";
  EXPECT_EQ(q.leased(), 2u);
  std::shared_ptr<BatchPayload> p = q.TakeLease(0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, a.payload) << "the lease returns the payload it handed out";
  EXPECT_EQ(q.TakeLease(0), nullptr) << "a lease ends once";
  ASSERT_TRUE(q.Pop(2, &c, nullptr).value());
  EXPECT_EQ(c.id, 2u);
}

TEST(DeliveryQueue, KeepsDistinctCorruptMessagesUpToTheCap) {
  DeliveryQueue q;
  q.AddCorruptMessage("frame 1: bad checksum");
  q.AddCorruptMessage("frame 1: bad checksum");
  for (int i = 0; i < 40; ++i) q.AddCorruptMessage("frame " + std::to_string(i + 2));
  const DeliveryQueue::Counters c = q.counters();
  ASSERT_EQ(c.corrupt_messages.size(), DeliveryQueue::kMaxCorruptMessages);
  EXPECT_EQ(c.corrupt_messages[0], "frame 1: bad checksum");
  EXPECT_EQ(c.corrupt_messages[1], "frame 2");
}

TEST(DeliveryQueue, EndWithoutBatchesReturnsFalse) {
  DeliveryQueue q;
  q.End();
  BatchMsg m;
  EXPECT_EQ(q.Pop(8, &m, nullptr).value(), false);
}

TEST(DeliveryQueue, EndedOnceTheLastBatchIsQueuedBeforeItIsTaken) {
  DeliveryQueue q;
  EXPECT_FALSE(q.ended());
  q.Push(Batch(0), true);
  EXPECT_FALSE(q.ended());
  q.Push(Batch(1, 1, /*is_last=*/true), true);
  EXPECT_TRUE(q.ended());  // both batches still queued
  BatchMsg m;
  EXPECT_TRUE(q.Pop(8, &m, nullptr).value());
  EXPECT_TRUE(q.ended());
}

}  // namespace
}  // namespace sluice::pipeline_internal
