#include "pipeline/pinned_buffer_pool.h"

#include <cstdint>
#include <thread>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(PinnedBufferPool, HandsOutFixedPageAlignedBuffersAndNeverGrows) {
  auto pool = PinnedBufferPool::Create(2, 1000);
  ASSERT_TRUE(pool.ok()) << pool.status();
  PinnedBuffer a = (*pool)->Acquire();
  std::optional<PinnedBuffer> b = (*pool)->TryAcquire();
  ASSERT_TRUE(b.has_value());
  EXPECT_NE(a.data(), b->data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_FALSE((*pool)->TryAcquire().has_value()) << "the pool must not grow";
  EXPECT_EQ((*pool)->in_use(), 2u);
  b->Reset();
  EXPECT_EQ((*pool)->in_use(), 1u);
  EXPECT_TRUE((*pool)->TryAcquire().has_value());
  EXPECT_EQ((*pool)->high_water(), 2u);
}

TEST(PinnedBufferPool, AcquireWaitsForAReturnAndCountsTheWait) {
  auto pool = PinnedBufferPool::Create(1, 64);
  ASSERT_TRUE(pool.ok());
  PinnedBuffer held = (*pool)->Acquire();
  char* const data = held.data();
  // The returner gives the buffer back only once Acquire() below is blocked on it, so the
  // wait is certain and must be counted exactly once.
  std::thread returner([&] {
    while ((*pool)->waiting() == 0) std::this_thread::yield();
    held.Reset();
  });
  PinnedBuffer got = (*pool)->Acquire();
  returner.join();
  EXPECT_EQ(got.data(), data);
  EXPECT_EQ((*pool)->waits(), 1u);
  EXPECT_GT((*pool)->wait_ns(), 0);
  EXPECT_EQ((*pool)->waiting(), 0u);
}

TEST(PinnedBufferPool, MovedHandleReturnsOnce) {
  auto pool = PinnedBufferPool::Create(1, 64);
  ASSERT_TRUE(pool.ok());
  {
    PinnedBuffer a = (*pool)->Acquire();
    PinnedBuffer b = std::move(a);
    EXPECT_FALSE(a.valid());
    EXPECT_TRUE(b.valid());
  }
  EXPECT_EQ((*pool)->in_use(), 0u);
}

TEST(PinnedBufferPool, InvalidSizes) {
  EXPECT_EQ(PinnedBufferPool::Create(0, 64).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinnedBufferPool::Create(1, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PinnedBufferPool, HostBuffersArePageAlignedAndNotPinned) {
  auto pool = PinnedBufferPool::Create(3, 100);
  ASSERT_TRUE(pool.ok());
  EXPECT_FALSE((*pool)->pinned());
  PinnedBuffer b = (*pool)->Acquire();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_EQ(b.size(), 100u);
}

}  // namespace
}  // namespace sluice
