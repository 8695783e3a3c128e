// Data-parallel sluice-train under Open MPI's mpirun (docs/distributed.md): the built binary,
// 1 and 2 ranks on this machine, compared with each other.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/env.h"
#include "engine/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "tests/tools/learnable_records.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using Output = testing::ToolOutput;
using testing::FinalAccuracy;

Output Shell(const std::string& cmd) { return testing::RunShell(cmd); }

std::string Mpirun(int ranks) { return absl::StrCat(SLUICE_MPIRUN, " -np ", ranks, " "); }

RecordArrays MakeRecords(uint64_t count, uint64_t seed) {
  return testing::MakeLearnableRecords(count, seed, 60);
}

// "epoch step" -> the record ids trained at that step (sorted), from --record-order files.
std::map<std::pair<int, int>, std::vector<int>> ReadOrder(const std::vector<std::string>& files) {
  std::map<std::pair<int, int>, std::vector<int>> steps;
  for (const std::string& f : files) {
    std::ifstream in(f);
    std::string line;
    while (std::getline(in, line)) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() < 2) continue;
      int epoch = 0, step = 0;
      EXPECT_TRUE(absl::SimpleAtoi(parts[0], &epoch) && absl::SimpleAtoi(parts[1], &step)) << line;
      std::vector<int>& ids = steps[{epoch, step}];
      for (size_t i = 2; i < parts.size(); ++i) {
        int id = -1;
        EXPECT_TRUE(absl::SimpleAtoi(parts[i], &id)) << line;
        ids.push_back(id);
      }
    }
  }
  for (auto& [k, ids] : steps) std::sort(ids.begin(), ids.end());
  return steps;
}

std::vector<HostTensor> ReadWeights(const std::string& path) {
  auto bytes = ReadFileToString(Env::Default(), path);
  EXPECT_TRUE(bytes.ok()) << path;
  if (!bytes.ok()) return {};
  auto tensors = DecodeSafetensors(*bytes, path);
  EXPECT_TRUE(tensors.ok()) << tensors.status();
  return tensors.ok() ? *tensors : std::vector<HostTensor>{};
}

// Largest |a - b| relative to the largest |a| of each tensor.
double MaxRelativeDifference(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    EXPECT_EQ(a[t].values.size(), b[t].values.size());
    double scale = 1e-12, diff = 0;
    for (size_t i = 0; i < std::min(a[t].values.size(), b[t].values.size()); ++i) {
      scale = std::max(scale, std::abs(double{a[t].values[i]}));
      diff = std::max(diff, std::abs(double{a[t].values[i]} - b[t].values[i]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

class SluiceTrainMpiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/sluice_train_mpi_test_XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
    WriteDatasetOptions options;
    options.sharding.records_per_shard = 1500;
    options.sharding.records_per_frame = 100;
    ASSERT_TRUE(
        WriteDataset(Env::Default(), *dir_ + "/data", "train", MakeRecords(4000, 1), options).ok());
    ASSERT_TRUE(
        WriteDataset(Env::Default(), *dir_ + "/data", "test", MakeRecords(1000, 2), options).ok());
  }
  static void TearDownTestSuite() {
    std::system(absl::StrCat("rm -rf ", *dir_).c_str());
    delete dir_;
  }
  void SetUp() override {
    if (Shell(absl::StrCat(Mpirun(1), "true")).exit_code != 0) {
      GTEST_SKIP() << "mpirun cannot start a job here (" << SLUICE_MPIRUN << ")";
    }
  }
  // The common flags of a run; `name` names its outputs under the test directory.
  static std::string Train(const std::string& name, const std::string& extra = "") {
    return absl::StrCat(SLUICE_TRAIN_BIN, " --data=", *dir_, "/data --device=cpu --quiet ",
                        "--report=false --ceilings=false --batch-size=32 --epochs=2 --lr=0.05 ",
                        "--shuffle --seed=7 --export-safetensors=", *dir_, "/", name,
                        ".safetensors --record-order=", *dir_, "/", name, ".order ", extra);
  }
  static std::string* dir_;
};
std::string* SluiceTrainMpiTest::dir_ = nullptr;

TEST_F(SluiceTrainMpiTest, TwoRanksTrainTheSameSamplesAndWeightsAsOneRankWithTheGlobalBatch) {
  Output one = Shell(Train("one"));
  ASSERT_EQ(one.exit_code, 0) << one.text;
  Output two = Shell(Mpirun(2) + Train("two"));
  ASSERT_EQ(two.exit_code, 0) << two.text;
  EXPECT_NE(two.text.find("2 ranks"), std::string::npos) << two.text;

  // Step by step, the union of the two ranks' slices is the one-rank batch.
  const auto order1 = ReadOrder({*dir_ + "/one.order"});
  const auto order2 = ReadOrder({*dir_ + "/two.order.rank0", *dir_ + "/two.order.rank1"});
  ASSERT_EQ(order1.size(), 2u * 125);  // 4000 / 32 steps in each of 2 epochs
  EXPECT_EQ(order1, order2);
  // Each rank trained half of every global batch.
  const auto rank0 = ReadOrder({*dir_ + "/two.order.rank0"});
  for (const auto& [step, ids] : rank0) EXPECT_EQ(ids.size(), 16u) << step.second;

  // The same mean gradient at every step, up to the order of float summation.
  const double diff = MaxRelativeDifference(ReadWeights(*dir_ + "/one.safetensors"),
                                            ReadWeights(*dir_ + "/two.safetensors"));
  EXPECT_LT(diff, 1e-4);
  const double acc1 = FinalAccuracy(one.text), acc2 = FinalAccuracy(two.text);
  ASSERT_GT(acc1, 0.5) << one.text;
  EXPECT_NEAR(acc1, acc2, 0.001) << two.text;
  EXPECT_NE(two.text.find("(1000 samples)"), std::string::npos) << two.text;  // whole test split
}

TEST_F(SluiceTrainMpiTest, TwoRunsOfTheSameTwoRankJobEndBitwiseIdentical) {
  Output a = Shell(Mpirun(2) + Train("a"));
  ASSERT_EQ(a.exit_code, 0) << a.text;
  Output b = Shell(Mpirun(2) + Train("b"));
  ASSERT_EQ(b.exit_code, 0) << b.text;
  auto wa = ReadFileToString(Env::Default(), *dir_ + "/a.safetensors");
  auto wb = ReadFileToString(Env::Default(), *dir_ + "/b.safetensors");
  ASSERT_TRUE(wa.ok() && wb.ok());
  EXPECT_TRUE(*wa == *wb);
}

TEST_F(SluiceTrainMpiTest, ACheckpointOfTwoRanksResumesOnOneAndContinuesTheSameSequence) {
  const std::string ckpt = *dir_ + "/ckpt_resume";
  Output whole = Shell(Mpirun(2) + Train("whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.text;
  // Killed (as if) after 150 steps: the checkpoint every 50 steps is at step 150.
  Output first = Shell(Mpirun(2) + Train("first", absl::StrCat("--checkpoint-dir=", ckpt,
                                                               " --checkpoint-every=50 "
                                                               "--stop-after-steps=150")));
  ASSERT_EQ(first.exit_code, 0) << first.text;
  // The summary counts the cut-short second epoch too: 150 steps of 32 (it said 4000, the first
  // epoch alone, and "0 samples" when the stop came in the first epoch).
  EXPECT_NE(first.text.find(" 4800 samples in "), std::string::npos) << first.text;
  Output rest = Shell(Train("rest", absl::StrCat("--checkpoint-dir=", ckpt, " --resume=auto")));
  ASSERT_EQ(rest.exit_code, 0) << rest.text;
  EXPECT_NE(rest.text.find("resumed at epoch 2 step 25"), std::string::npos) << rest.text;
  // The resumed single rank trains exactly the steps the two ranks had left.
  const auto full = ReadOrder({*dir_ + "/whole.order.rank0", *dir_ + "/whole.order.rank1"});
  const auto tail = ReadOrder({*dir_ + "/rest.order"});
  ASSERT_EQ(tail.size(), 100u);
  for (const auto& [step, ids] : tail) {
    ASSERT_TRUE(full.count(step)) << step.first << " " << step.second;
    EXPECT_EQ(full.at(step), ids) << step.first << " " << step.second;
  }
  EXPECT_LT(MaxRelativeDifference(ReadWeights(*dir_ + "/whole.safetensors"),
                                  ReadWeights(*dir_ + "/rest.safetensors")),
            1e-4);
}

TEST_F(SluiceTrainMpiTest, AnEmptyLastSliceAndSkippedFramesNeverHangTheOtherRank) {
  // 4000 records in global batches of 1333: the last one holds 1 sample, so rank 1's share of
  // it is empty; it still joins the step's exchange.
  Output one = Shell(Train("uneven1", "--batch-size=1333 --epochs=2"));
  ASSERT_EQ(one.exit_code, 0) << one.text;
  Output two = Shell(Mpirun(2) + Train("uneven2", "--batch-size=1333 --epochs=2"));
  ASSERT_EQ(two.exit_code, 0) << two.text;
  const auto order1 = ReadOrder({*dir_ + "/uneven1.order"});
  const auto rank1 = ReadOrder({*dir_ + "/uneven2.order.rank1"});
  ASSERT_EQ(order1.size(), 8u);
  EXPECT_EQ(order1, ReadOrder({*dir_ + "/uneven2.order.rank0", *dir_ + "/uneven2.order.rank1"}));
  ASSERT_EQ(rank1.size(), 8u);  // every step, the empty ones included
  EXPECT_TRUE(rank1.at({0, 3}).empty());
  EXPECT_TRUE(rank1.at({1, 3}).empty());
  EXPECT_LT(MaxRelativeDifference(ReadWeights(*dir_ + "/uneven1.safetensors"),
                                  ReadWeights(*dir_ + "/uneven2.safetensors")),
            1e-4);

  // A corrupt frame skipped by the rank that owns its samples: the steps that lost samples are
  // averaged over the samples left, and both ranks finish.
  const std::string data = *dir_ + "/skip";
  ASSERT_EQ(Shell(absl::StrCat("cp -r ", *dir_, "/data ", data)).exit_code, 0);
  const std::string shard =
      data + "/" + Dataset::Open(Env::Default(), data).value()->manifest().shards[1].file;
  auto bytes = ReadFileToString(Env::Default(), shard);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[200] ^= 0x40;  // inside frame 0's stored bytes
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), shard, damaged).ok());
  Output skipped = Shell(absl::StrCat(Mpirun(2), SLUICE_TRAIN_BIN, " --data=", data,
                                      " --device=cpu --quiet --epochs=1 --report=false "
                                      "--on-corrupt=skip --max-corrupt-fraction=0.05"));
  EXPECT_EQ(skipped.exit_code, 0) << skipped.text;
  EXPECT_LT(skipped.seconds, 60.0);
  EXPECT_NE(skipped.text.find("final test accuracy"), std::string::npos) << skipped.text;
}

TEST_F(SluiceTrainMpiTest, RanksStartedWithDifferentFlagsAreRefusedAtStart) {
  Output out = Shell(absl::StrCat(SLUICE_MPIRUN, " -np 1 ", Train("m0", "--lr=0.05"), " : -np 1 ",
                                  Train("m1", "--lr=0.02")));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("2 ranks disagree on the run's settings"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("rank 1 has lr=0.0199999996, rank 0 has 0.0500000007"), std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find("epoch 1:"), std::string::npos) << out.text;  // nothing trained
}

// The chain is compared by its canonical identity: another chain, or none, on one rank is
// refused at start naming both; the same ops spelled otherwise agree.
TEST_F(SluiceTrainMpiTest, RanksWithDifferentTransformsAreRefusedAtStartNamingBoth) {
  const std::string common = "--epochs=1 --collective-timeout-s=10 ";
  const std::string crop = "--transforms='RandomCrop(24, padding=2)' --layers=576,10 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--transforms='RandomCrop(24, padding=4)' --layers=576,10 ",
       "rank 1 has --transforms=RandomCrop(size=(24, 24), padding=(4, 4, 4, 4)"},
      {"--transforms='CenterCrop(24)' --layers=576,10 ",
       "rank 1 has --transforms=CenterCrop(size=(24, 24))"},
  };
  for (const auto& [other, named] : cases) {
    Output out =
        Shell(absl::StrCat("timeout 120 ", SLUICE_MPIRUN, " -np 1 ", Train("t0", common + crop),
                           " : -np 1 ", Train("t1", common + other)));
    EXPECT_NE(out.exit_code, 0) << other << "\n" << out.text;
    EXPECT_NE(out.text.find("2 ranks disagree on the run's settings"), std::string::npos)
        << out.text;
    EXPECT_NE(out.text.find(named), std::string::npos) << other << "\n" << out.text;
    EXPECT_NE(out.text.find("rank 0 has RandomCrop(size=(24, 24), padding=(2, 2, 2, 2)"),
              std::string::npos)
        << out.text;
    EXPECT_EQ(out.text.find("epoch 1:"), std::string::npos) << out.text;  // nothing trained
  }
  Output out =
      Shell(absl::StrCat("timeout 120 ", SLUICE_MPIRUN, " -np 1 ", Train("t0", common + crop),
                         " : -np 1 ", Train("t1", common + "--layers=784,10")));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("rank 1 has --transforms=none, rank 0 has RandomCrop(size=(24, 24)"),
            std::string::npos)
      << out.text;
  out = Shell(absl::StrCat(
      "timeout 120 ", SLUICE_MPIRUN, " -np 1 ", Train("t0", common + crop), " : -np 1 ",
      Train("t1", common + "--transforms='RandomCrop(size=24,padding=2)' --layers=576,10")));
  EXPECT_EQ(out.exit_code, 0) << out.text;
}

// Open MPI's shared-memory segments (/dev/shm/vader_segment.*) present now.
std::set<std::string> SharedMemorySegments() {
  std::set<std::string> names;
  auto children = Env::Default()->GetChildren("/dev/shm");
  if (!children.ok()) return names;
  for (const std::string& c : *children) {
    if (c.rfind("vader_segment", 0) == 0) names.insert(c);
  }
  return names;
}

// A job run in the background by a shell, its output in `log`. The ranks' command lines hold
// `marker` (a pattern that does not match the shells running pgrep with it).
struct BackgroundJob {
  pid_t shell = -1;
  std::string marker;
  std::string log;
};

BackgroundJob StartInBackground(const std::string& cmd, const std::string& marker,
                                const std::string& log) {
  BackgroundJob job{-1, marker, log};
  job.shell = ::fork();
  if (job.shell == 0) {
    const std::string line = absl::StrCat(cmd, " > ", log, " 2>&1");
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  return job;
}

// The pid of the job's rank `rank` (found by its environment) once it runs; -1 after 20 s.
pid_t FindRank(const BackgroundJob& job, int rank) {
  const std::string wanted = absl::StrCat("OMPI_COMM_WORLD_RANK=", rank, std::string(1, '\0'));
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Output ps = Shell(absl::StrCat("pgrep -f -- '", job.marker, "'"));
    for (absl::string_view pid_text : absl::StrSplit(ps.text, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (!absl::SimpleAtoi(pid_text, &pid)) continue;
      // /proc files report size 0: read them as a stream.
      std::ifstream in(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
      const std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (env.find(wanted) != std::string::npos) return pid;
    }
  }
  return -1;
}

struct JobEnd {
  bool ended = false;  // within the limit (else every rank was killed)
  int exit_code = -1;
  double seconds = 0;  // from the call
  std::string log;
};

// Waits up to `limit_s` for the job; then kills whatever of it is left.
JobEnd WaitForJob(const BackgroundJob& job, double limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(job.shell, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(limit_s)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  JobEnd end;
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  end.ended = done != 0;
  if (!end.ended) {
    Shell(absl::StrCat("pkill -9 -f -- '", job.marker, "'"));
    ::waitpid(job.shell, &status, 0);
  }
  end.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto log = ReadFileToString(Env::Default(), job.log);
  end.log = log.ok() ? *log : "";
  return end;
}

// Waits until `path` holds a line (sluice-train's --metrics-out gets one after each epoch):
// the job is training, whatever its start-up took on a loaded machine. False after `limit_s`.
bool WaitForLine(const std::string& path, double limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  while (true) {
    auto text = ReadFileToString(Env::Default(), path);
    if (text.ok() && text->find('\n') != std::string::npos) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(limit_s)) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The segments in `now` that were not in `before`.
std::set<std::string> NewSegments(const std::set<std::string>& before) {
  std::set<std::string> left;
  for (const std::string& s : SharedMemorySegments()) {
    if (!before.count(s)) left.insert(s);
  }
  return left;
}

TEST_F(SluiceTrainMpiTest, AKilledRankEndsEveryRankWithinSecondsAndLeavesNoSharedMemory) {
  const std::set<std::string> segments_before = SharedMemorySegments();
  // A long run; rank 1 is killed with SIGKILL once both ranks are training.
  BackgroundJob job = StartInBackground(
      Mpirun(2) + Train("killed",
                        absl::StrCat("--epochs=1000", " --metrics-out=", *dir_, "/killed.metrics")),
      *dir_ + "/killed[.]safetensors", *dir_ + "/killed.log");
  const pid_t rank1 = FindRank(job, 1);
  ASSERT_GT(rank1, 0) << "rank 1 never started";
  const bool training = WaitForLine(absl::StrCat(*dir_, "/killed.metrics"), 60);
  if (!training) WaitForJob(job, 0);  // ends it
  ASSERT_TRUE(training) << "no epoch ended within 60 s";
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const JobEnd end = WaitForJob(job, 60);
  ASSERT_TRUE(end.ended) << "the job was still running 60 s after rank 1 was killed\n" << end.log;
  EXPECT_LT(end.seconds, 30.0);
  EXPECT_NE(end.exit_code, 0) << end.log;
  EXPECT_EQ(Shell(absl::StrCat("pgrep -f -- '", job.marker, "'")).text, "");  // no rank left
  // No shared-memory segment of the job is left behind.
  const std::set<std::string> left = NewSegments(segments_before);
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << *left.begin();
}

TEST_F(SluiceTrainMpiTest, AStoppedRankEndsTheJobAtTheCollectiveTimeoutNamingTheRankAndStep) {
  const std::set<std::string> segments_before = SharedMemorySegments();
  BackgroundJob job = StartInBackground(
      Mpirun(2) + Train("stopped", absl::StrCat("--epochs=1000 --collective-timeout-s=10",
                                                " --metrics-out=", *dir_, "/stopped.metrics")),
      *dir_ + "/stopped[.]safetensors", *dir_ + "/stopped.log");
  const pid_t rank1 = FindRank(job, 1);
  ASSERT_GT(rank1, 0) << "rank 1 never started";
  const bool training = WaitForLine(absl::StrCat(*dir_, "/stopped.metrics"), 60);
  if (!training) WaitForJob(job, 0);  // ends it
  ASSERT_TRUE(training) << "no epoch ended within 60 s";
  ASSERT_EQ(::kill(rank1, SIGSTOP), 0);
  const JobEnd end = WaitForJob(job, 60);
  ASSERT_TRUE(end.ended) << "the job was still running 60 s after rank 1 was stopped\n" << end.log;
  EXPECT_GE(end.seconds, 9.0) << end.log;  // not before the timeout
  EXPECT_NE(end.exit_code, 0) << end.log;
  EXPECT_NE(end.log.find("sluice-train: rank 0 of 2 waited"), std::string::npos) << end.log;
  EXPECT_NE(end.log.find("after training step "), std::string::npos) << end.log;
  EXPECT_NE(end.log.find("(--collective-timeout-s=10): rank 1 did not arrive"), std::string::npos)
      << end.log;
  EXPECT_EQ(Shell(absl::StrCat("pgrep -f -- '", job.marker, "'")).text, "");  // no rank left
  const std::set<std::string> left = NewSegments(segments_before);
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << *left.begin();
}

TEST_F(SluiceTrainMpiTest, SigtermToOneRankStopsTheJobNamingTheSignalWithItsExitCode) {
  BackgroundJob job = StartInBackground(
      Mpirun(2) + Train("term", absl::StrCat("--epochs=1000 --collective-timeout-s=30",
                                             " --metrics-out=", *dir_, "/term.metrics")),
      *dir_ + "/term[.]safetensors", *dir_ + "/term.log");
  const pid_t rank1 = FindRank(job, 1);
  ASSERT_GT(rank1, 0) << "rank 1 never started";
  const bool training = WaitForLine(absl::StrCat(*dir_, "/term.metrics"), 60);
  if (!training) WaitForJob(job, 0);  // ends it
  ASSERT_TRUE(training) << "no epoch ended within 60 s";
  ASSERT_EQ(::kill(rank1, SIGTERM), 0);
  const JobEnd end = WaitForJob(job, 60);
  ASSERT_TRUE(end.ended) << end.log;
  EXPECT_NE(end.log.find("interrupted: another rank was stopped by SIGTERM"), std::string::npos)
      << end.log;
  EXPECT_EQ(end.log.find("SIGINT"), std::string::npos) << end.log;
  EXPECT_EQ(end.exit_code, 128 + SIGTERM) << end.log;
}

// On a slow simulated device (2 s per modelled step) the rank without the signal used to wait
// out the modelled time of every step it had enqueued (~26 s here): the agreed stop skips it on
// every rank. What is left is the wait for the agreement (every kStopPollSteps steps): 12.7 s.
TEST_F(SluiceTrainMpiTest, AnAgreedStopSkipsTheModelledTimeOnEveryRank) {
  BackgroundJob job =
      StartInBackground(Mpirun(2) + Train("simterm",
                                          "--device=sim --sim-compute-us=2000000 --epochs=1 "
                                          "--collective-timeout-s=120"),
                        *dir_ + "/simterm[.]safetensors", *dir_ + "/simterm.log");
  const pid_t rank1 = FindRank(job, 1);
  ASSERT_GT(rank1, 0) << "rank 1 never started";
  std::this_thread::sleep_for(std::chrono::seconds(6));  // a few modelled steps in
  ASSERT_EQ(::kill(rank1, SIGTERM), 0);
  const JobEnd end = WaitForJob(job, 120);  // its seconds: from the signal
  ASSERT_TRUE(end.ended) << end.log;
  EXPECT_EQ(end.exit_code, 128 + SIGTERM) << end.log;
  std::fprintf(stderr, "the job ended %.1f s after the signal\n", end.seconds);
  EXPECT_LT(end.seconds, 20.0) << end.log;
}

// --collective-timeout-s bounds a run that would hang without the agreement.
TEST_F(SluiceTrainMpiTest, ASettingThatDecidesACollectiveOnOneRankOnlyIsRefusedAtStart) {
  const std::string ckpt = *dir_ + "/one_rank_ckpt";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {absl::StrCat("--checkpoint-dir=", ckpt),
       "rank 1 has --checkpoint-dir=none, rank 0 has a directory"},
      {absl::StrCat("--trace=", *dir_, "/one_rank.trace"),
       "rank 1 has --trace=none, rank 0 has a file"},
      {"--report-every=50", "rank 1 has --report-every=0, rank 0 has 50"},
  };
  for (const auto& [flag, named] : cases) {
    const std::string common = "--epochs=1 --collective-timeout-s=10 ";
    Output out = Shell(absl::StrCat("timeout 120 ", SLUICE_MPIRUN, " -np 1 ",
                                    Train("o0", common + flag), " : -np 1 ", Train("o1", common)));
    EXPECT_NE(out.exit_code, 0) << flag << "\n" << out.text;
    EXPECT_NE(out.text.find("2 ranks disagree on the run's settings"), std::string::npos)
        << flag << "\n"
        << out.text;
    EXPECT_NE(out.text.find(named), std::string::npos) << flag << "\n" << out.text;
    EXPECT_EQ(out.text.find("epoch 1:"), std::string::npos) << out.text;  // nothing trained
    EXPECT_LT(out.seconds, 60) << flag << "\n" << out.text;
  }
}

TEST_F(SluiceTrainMpiTest, CollectiveTimeoutOutsideItsBoundsIsAUsageError) {
  for (const char* value : {"0", "-1", "nan", "inf", "1e6"}) {
    Output out =
        Shell(Mpirun(2) + Train("bad_timeout", absl::StrCat("--collective-timeout-s=", value)));
    EXPECT_EQ(out.exit_code, 2) << value << ": " << out.text;
    EXPECT_NE(out.text.find("--collective-timeout-s: "), std::string::npos) << out.text;
    EXPECT_NE(out.text.find("is not in [1, 86400]"), std::string::npos) << out.text;
  }
}

TEST_F(SluiceTrainMpiTest, WhatIfAllAndCheckAdviceAreRefusedInADataParallelJob) {
  for (const std::string flag : {"--what-if=all", "--check-advice"}) {
    Output out = Shell(absl::StrCat(
        "timeout 120 ", Mpirun(2), Train("rerun", "--epochs=1 --collective-timeout-s=10 " + flag)));
    EXPECT_EQ(out.exit_code, 2) << out.text;
    EXPECT_NE(out.text.find(flag + " runs the job again on rank 0 alone"), std::string::npos)
        << out.text;
    EXPECT_EQ(out.text.find("epoch 1:"), std::string::npos) << out.text;  // nothing trained
    EXPECT_LT(out.seconds, 60) << out.text;
  }
}

TEST_F(SluiceTrainMpiTest, ADataErrorOnOneRankEndsEveryRankNamingTheRankAndTheFrame) {
  // Damage one frame: the frame-aware split gives its samples to one rank only.
  const std::string data = *dir_ + "/bad";
  ASSERT_EQ(Shell(absl::StrCat("cp -r ", *dir_, "/data ", data)).exit_code, 0);
  const std::string shard_name =
      Dataset::Open(Env::Default(), data).value()->manifest().shards[1].file;
  auto bytes = ReadFileToString(Env::Default(), data + "/" + shard_name);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[200] ^= 0x40;  // inside frame 0's stored bytes
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), data + "/" + shard_name, damaged).ok());
  Output out = Shell(absl::StrCat(Mpirun(2), SLUICE_TRAIN_BIN, " --data=", data,
                                  " --device=cpu --quiet --epochs=1 --report=false"));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_LT(out.seconds, 30.0);
  EXPECT_NE(out.text.find(shard_name), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("sluice-train: rank "), std::string::npos) << out.text;
}

TEST_F(SluiceTrainMpiTest, TwoRankReportHasTheExchangeBothRanksAStragglerAndATraceProcessEach) {
  const std::string json_path = *dir_ + "/dp_report.json", trace_path = *dir_ + "/dp_trace.json";
  Output out = Shell(Mpirun(2) + Train("dp", absl::StrCat("--epochs=1 --report=true --report-json=",
                                                          json_path, " --trace=", trace_path)));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // Rank 0 alone prints the report.
  size_t reports = 0;
  for (size_t at = out.text.find("bottleneck report:"); at != std::string::npos;
       at = out.text.find("bottleneck report:", at + 1)) {
    ++reports;
  }
  EXPECT_EQ(reports, 1u) << out.text;
  auto text = ReadFileToString(Env::Default(), json_path);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json j = nlohmann::json::parse(*text);
  ASSERT_TRUE(j.contains("exchange")) << *text;
  const nlohmann::json& x = j["exchange"];
  EXPECT_EQ(x["world_size"], 2);
  // 784*128 + 128 + 128*10 + 10 = 101,770 float gradients per step.
  EXPECT_EQ(x["bytes_per_step"], 4 * 101770);
  EXPECT_EQ(x["steps"], 125);  // 4000 / 32 global steps
  EXPECT_TRUE(x["ceiling"]["measured"].get<bool>()) << x["ceiling"].dump();
  EXPECT_EQ(x["ceiling"]["bytes"], 4 * 101770);
  EXPECT_EQ(x["hidden_pct"], 0);
  const int straggler = x["straggler"]["rank"];
  EXPECT_TRUE(straggler == 0 || straggler == 1);
  EXPECT_FALSE(x["straggler"]["limiting_stage"].get<std::string>().empty());
  // The printed report names it (the verdict may be communication-bound on a busy machine).
  EXPECT_NE(out.text.find(absl::StrCat("straggler  rank ", straggler, " is the straggler: its ")),
            std::string::npos)
      << out.text;
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(j["ranks"][r]["rank"], r);
    EXPECT_GT(j["ranks"][r]["frames_decoded"].get<int64_t>(), 0);
  }
  // 40 frames of 100 records, decoded by at least one rank each.
  EXPECT_GE(x["duplicated_decode_factor"].get<double>(), 1.0);

  auto trace_text = ReadFileToString(Env::Default(), trace_path);
  ASSERT_TRUE(trace_text.ok()) << trace_text.status();
  const nlohmann::json trace = nlohmann::json::parse(*trace_text);
  std::map<int, std::string> processes;
  std::map<int, int> compute_spans;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "X" && e["name"] == "compute") ++compute_spans[e["pid"]];
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "rank 0"}, {1, "rank 1"}}));
  EXPECT_EQ(compute_spans, (std::map<int, int>{{0, 125}, {1, 125}}));
}

}  // namespace
}  // namespace sluice
