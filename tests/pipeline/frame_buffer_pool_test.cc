#include "pipeline/internal/frame_buffer_pool.h"

#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::pipeline_internal {
namespace {

TEST(FrameBufferPool, ReturnedBufferIsReusedNotReallocated) {
  FrameBufferPool pool(1000);
  std::unique_ptr<char[]> a = pool.Take();
  ASSERT_NE(a, nullptr);
  const char* first = a.get();
  EXPECT_EQ(pool.allocated(), 1u);
  pool.Return(std::move(a));
  EXPECT_EQ(pool.free_buffers(), 1u);
  std::unique_ptr<char[]> b = pool.Take();
  EXPECT_EQ(b.get(), first) << "a returned buffer must be handed out again";
  EXPECT_EQ(pool.allocated(), 1u) << "taking a returned buffer must not allocate";
  EXPECT_EQ(pool.free_buffers(), 0u);
}

TEST(FrameBufferPool, GrowsOnlyToTheMostBuffersOutAtOnce) {
  FrameBufferPool pool(64);
  for (int round = 0; round < 5; ++round) {
    std::vector<std::unique_ptr<char[]>> out;
    for (int i = 0; i < 3; ++i) out.push_back(pool.Take());
    std::set<const char*> distinct;
    for (const auto& b : out) distinct.insert(b.get());
    EXPECT_EQ(distinct.size(), 3u) << "a buffer was handed out twice";
    for (auto& b : out) pool.Return(std::move(b));
  }
  EXPECT_EQ(pool.allocated(), 3u) << "rounds after the first must reuse the buffers";
  EXPECT_EQ(pool.free_buffers(), 3u);
}

TEST(FrameBufferPool, ReturningNullIsIgnored) {
  FrameBufferPool pool(64);
  pool.Return(nullptr);
  EXPECT_EQ(pool.free_buffers(), 0u);
  EXPECT_NE(pool.Take(), nullptr) << "a null buffer must not be handed out";
  EXPECT_EQ(pool.allocated(), 1u);
}

}  // namespace
}  // namespace sluice::pipeline_internal
