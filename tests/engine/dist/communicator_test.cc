// The single-process communicator and the start-up agreement check, without MPI: a scripted
// communicator plays the other ranks.
#include "engine/dist/communicator.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace sluice::dist {
namespace {

// Rank 0 of a world whose AllGather returns scripted strings for the other ranks.
class ScriptedWorld final : public Communicator {
 public:
  explicit ScriptedWorld(std::vector<std::string> others) : others_(std::move(others)) {}
  int rank() const override { return 0; }
  int size() const override { return static_cast<int>(others_.size()) + 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string description() const override { return "scripted"; }
  absl::Status AllReduceSum(float*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(double*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(int64_t*, size_t) override { return absl::OkStatus(); }
  absl::Status AllReduceMax(double*, size_t) override { return absl::OkStatus(); }
  absl::Status Broadcast(void*, size_t, int) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> AllGather(const std::string& mine) override {
    std::vector<std::string> all{mine};
    all.insert(all.end(), others_.begin(), others_.end());
    return all;
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Duplicate() override {
    return absl::UnimplementedError("scripted");
  }
  [[noreturn]] void Abort(int code) override { std::_Exit(code); }

 private:
  std::vector<std::string> others_;
};

TEST(SingleProcessCommunicatorTest, IsAWorldOfOneWhoseCollectivesKeepTheData) {
  auto comm = SingleProcessCommunicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_FALSE(comm->is_distributed());
  float f[2] = {1.5f, -2.0f};
  ASSERT_TRUE(comm->AllReduceSum(f, 2).ok());
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.0f);
  auto all = comm->AllGather("x");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, std::vector<std::string>{"x"});
  EXPECT_FALSE(comm->Broadcast(f, sizeof(f), 1).ok());  // there is no rank 1
}

TEST(DetectLauncherTest, NamesMpirunAndSrunFromTheirEnvironment) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS",
                        "SLURM_PROCID", "PMIX_RANK", "PMI_RANK"}) {
    ::unsetenv(v);
  }
  EXPECT_EQ(DetectLauncher(), "");
  ::setenv("SLURM_NTASKS", "4", 1);  // a batch script of a 4-task allocation: one process
  ::setenv("SLURM_PROCID", "0", 1);
  EXPECT_EQ(DetectLauncher(), "");
  ::setenv("SLURM_STEP_NUM_TASKS", "1", 1);
  EXPECT_EQ(DetectLauncher(), "");  // a one-task srun step is a single process
  ::setenv("SLURM_STEP_NUM_TASKS", "4", 1);
  EXPECT_EQ(DetectLauncher(), "srun");
  ::unsetenv("SLURM_NTASKS");
  ::unsetenv("SLURM_STEP_NUM_TASKS");
  ::unsetenv("SLURM_PROCID");
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(DetectLauncher(), "mpirun");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
}

TEST(CheckSameOnAllRanksTest, AcceptsIdenticalSettings) {
  ScriptedWorld world({"lr=0.01\nbatch_size=32\n"});
  EXPECT_TRUE(
      CheckSameOnAllRanks(&world, "the run's settings", {{"lr", "0.01"}, {"batch_size", "32"}})
          .ok());
}

TEST(CheckSameOnAllRanksTest, NamesEachDifferingKeyWithBothValues) {
  ScriptedWorld world({"lr=0.01\nbatch_size=32\n", "lr=0.02\nbatch_size=64\n"});
  absl::Status s =
      CheckSameOnAllRanks(&world, "the run's settings", {{"lr", "0.01"}, {"batch_size", "32"}});
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("3 ranks disagree on the run's settings"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("rank 2 has lr=0.02, rank 0 has 0.01"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("rank 2 has batch_size=64, rank 0 has 32"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("rank 1"), std::string::npos) << s.message();
}

TEST(CheckSameOnAllRanksTest, NamesAKeyThatOneRankLacks) {
  ScriptedWorld world({"lr=0.01\n"});
  absl::Status s =
      CheckSameOnAllRanks(&world, "settings", {{"lr", "0.01"}, {"data.manifest_xxh3", "ab"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1 lacks data.manifest_xxh3 (rank 0 has ab)"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace sluice::dist
