#include "engine/cpu/internal/worker_team.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::cpu_internal {
namespace {

// Every claimed item is done exactly once per run, whichever threads join, and everything the
// team threads wrote is visible to the caller when Run returns.
TEST(WorkerTeamTest, EveryItemIsDoneOncePerRunAndVisibleAfterRun) {
  for (int size : {1, 2, 3}) {
    SCOPED_TRACE(size);
    WorkerTeam team(size);
    EXPECT_EQ(team.size(), size);
    constexpr int kItems = 7;
    std::vector<int> done(kItems, 0);  // plain ints: Run's handshake must publish them
    for (int run = 0; run < 2000; ++run) {
      std::atomic<int> next{0};
      std::atomic<int> finished{0};
      team.Run([&] {
        for (int i; (i = next.fetch_add(1)) < kItems;) {
          ++done[i];
          finished.fetch_add(1, std::memory_order_release);
        }
        WorkerTeam::WaitUntil([&] { return finished.load(std::memory_order_acquire) == kItems; });
      });
      ASSERT_EQ(finished.load(), kItems);
    }
    for (int i = 0; i < kItems; ++i) EXPECT_EQ(done[i], 2000) << i;
  }
}

TEST(WorkerTeamTest, AnIdleTeamIsDestroyedPromptly) {
  WorkerTeam team(4);  // threads parked on the futex: the destructor wakes and joins them
}

}  // namespace
}  // namespace sluice::cpu_internal
