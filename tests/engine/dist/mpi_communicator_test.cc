// The MPI communicator under mpirun: run by ctest as `mpirun -np 2` (tests/engine/dist/
// CMakeLists.txt). Every rank runs every test; a failure on any rank fails the job.
#include <cmath>
#include <cstdio>
#include <thread>

#include "engine/dist/communicator.h"
#include "gtest/gtest.h"

namespace sluice::dist {
namespace {

Communicator* g_world = nullptr;

TEST(MpiCommunicatorTest, JoinsTheWorldTheLauncherStarted) {
  ASSERT_EQ(DetectLauncher(), "mpirun");
  EXPECT_EQ(g_world->size(), 2);
  EXPECT_TRUE(g_world->rank() == 0 || g_world->rank() == 1);
  EXPECT_EQ(g_world->local_size(), 2);  // both ranks on this machine
  EXPECT_EQ(g_world->local_rank(), g_world->rank());
  EXPECT_NE(g_world->description().find("mpirun"), std::string::npos);
}

TEST(MpiCommunicatorTest, SumsFloatsDoublesAndIntegersOverTheRanks) {
  const int r = g_world->rank();
  std::vector<float> f = {1.0f + r, 0.5f * r, -3.0f};
  ASSERT_TRUE(g_world->AllReduceSum(f.data(), f.size()).ok());
  EXPECT_EQ(f, (std::vector<float>{3.0f, 0.5f, -6.0f}));
  double d[2] = {1e300 * r, 0.25};
  ASSERT_TRUE(g_world->AllReduceSum(d, 2).ok());
  EXPECT_EQ(d[0], 1e300);
  EXPECT_EQ(d[1], 0.5);
  int64_t n = int64_t{1} << (40 + r);
  ASSERT_TRUE(g_world->AllReduceSum(&n, 1).ok());
  EXPECT_EQ(n, (int64_t{1} << 40) + (int64_t{1} << 41));
  double m = r == 1 ? 7.0 : -1.0;
  ASSERT_TRUE(g_world->AllReduceMax(&m, 1).ok());
  EXPECT_EQ(m, 7.0);
}

TEST(MpiCommunicatorTest, BroadcastsAndGathersStringsOfDifferentLengths) {
  char buf[16] = {};
  if (g_world->rank() == 1) std::snprintf(buf, sizeof(buf), "from rank 1");
  ASSERT_TRUE(g_world->Broadcast(buf, sizeof(buf), 1).ok());
  EXPECT_STREQ(buf, "from rank 1");
  auto all = g_world->AllGather(std::string(g_world->rank() * 3 + 1, 'a' + g_world->rank()));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, (std::vector<std::string>{"a", "bbbb"}));
}

TEST(MpiCommunicatorTest, ADuplicateRunsCollectivesOnAnotherThreadAtTheSameTime) {
  auto dup = g_world->Duplicate();
  ASSERT_TRUE(dup.ok()) << dup.status();
  // One thread sums on the duplicate while this one sums on the world: with one communicator
  // their collectives would match each other's and mix the results.
  std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
  absl::Status sa, sb;
  std::thread t([&] {
    for (int i = 0; i < 50; ++i) sa.Update((*dup)->AllReduceSum(a.data(), a.size()));
  });
  for (int i = 0; i < 50; ++i) sb.Update(g_world->AllReduceSum(b.data(), b.size()));
  t.join();
  ASSERT_TRUE(sa.ok()) << sa;
  ASSERT_TRUE(sb.ok()) << sb;
  EXPECT_EQ(a[0], std::pow(2.0f, 50));
  EXPECT_EQ(b[999], 2.0f * std::pow(2.0f, 50));
}

TEST(MpiCommunicatorTest, CheckSameOnAllRanksNamesTheRankThatDiffers) {
  const std::string lr = g_world->rank() == 0 ? "0.01" : "0.02";
  absl::Status s = CheckSameOnAllRanks(g_world, "settings", {{"seed", "1"}, {"lr", lr}});
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 1 has lr=0.02, rank 0 has 0.01"), std::string::npos)
      << s.message();
  EXPECT_TRUE(CheckSameOnAllRanks(g_world, "settings", {{"seed", "1"}}).ok());
}

}  // namespace
}  // namespace sluice::dist

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = sluice::dist::InitWorld(&argc, &argv);
  if (!world.ok()) {
    std::fprintf(stderr, "InitWorld: %s\n", std::string(world.status().message()).c_str());
    return 1;
  }
  sluice::dist::g_world = world->get();
  // Only rank 0 prints the gtest report; both ranks' failures fail the exit code.
  if ((*world)->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  int64_t failed = rc != 0 ? 1 : 0;
  (void)(*world)->AllReduceSum(&failed, 1);
  world->reset();  // MPI_Finalize
  return failed != 0 ? 1 : 0;
}
