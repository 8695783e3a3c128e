#include "engine/cpu/internal/worker_team.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/clock.h"
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

// The team threads' CPU time: a run in which a team thread spins for 20 ms of its own CPU adds
// at least that once Run has returned; a one-thread team has none.
TEST(WorkerTeamTest, TeamCpuTimeCountsTheTeamThreadsWork) {
  EXPECT_EQ(WorkerTeam(1).team_cpu_ns(), 0);
  WorkerTeam team(2);
  const int64_t before = team.team_cpu_ns();
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> team_thread_worked{false};
  for (int attempt = 0; attempt < 100 && !team_thread_worked.load(); ++attempt) {
    team.Run([&] {
      if (std::this_thread::get_id() == caller) {
        // Hold the run open until the team thread has joined and worked (or a while passed).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        while (!team_thread_worked.load() && std::chrono::steady_clock::now() < deadline) {
        }
        return;
      }
      const int64_t t0 = ThreadCpuNs();
      while (ThreadCpuNs() - t0 < 20'000'000) {
      }
      team_thread_worked.store(true);
    });
  }
  ASSERT_TRUE(team_thread_worked.load()) << "the team thread never joined a run";
  EXPECT_GE(team.team_cpu_ns() - before, 20'000'000);
}

TEST(WorkerTeamTest, AnIdleTeamIsDestroyedPromptly) {
  WorkerTeam team(4);  // threads parked on the futex: the destructor wakes and joins them
}

}  // namespace
}  // namespace sluice::cpu_internal
