// End-to-end tests of sluice-train's fail-safe rules: a stop ends the run within seconds
// whatever it is doing (a slow simulated device, an injected delay, the report's ceilings), an
// output to a FIFO never hangs the run, and a model too big for the host is refused at start.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "storage/dataset_writer.h"
#include "tests/tools/learnable_records.h"

namespace sluice {
namespace {

struct Output {
  int exit_code = -1;  // -1: killed, or never signalled when a signal was asked for
  std::string text;    // stdout + stderr
  double seconds_after_signal = -1;
  double seconds = 0;
};

std::vector<std::string> SplitArgs(const std::string& args) {
  std::vector<std::string> out;
  for (size_t start = 0; start < args.size();) {
    size_t end = args.find(' ', start);
    if (end == std::string::npos) end = args.size();
    if (end > start) out.push_back(args.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Runs sluice-train with `args` (SLUICE_CACHE_DIR = `cache_dir`). When `sig` != 0, sends it
// once the output contains `ready` (or, for an empty `ready`, `after_s` seconds after the
// start). The run is killed after `deadline_s`.
Output RunTrain(const std::string& args, const std::string& cache_dir, int sig = 0,
                const std::string& ready = "", double after_s = 0, double deadline_s = 120) {
  Output out;
  int fds[2];
  if (::pipe(fds) != 0) return out;
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::setenv("SLUICE_CACHE_DIR", cache_dir.c_str(), 1);
    std::vector<std::string> argv_s = SplitArgs(args);
    argv_s.insert(argv_s.begin(), SLUICE_TRAIN_BIN);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::chrono::steady_clock::time_point sent;
  bool signalled = false;
  bool killed = false;
  char buf[4096];
  while (true) {
    if (SecondsSince(start) > deadline_s) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd pfd = {fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 50) > 0) {
      const ssize_t n = ::read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      out.text.append(buf, static_cast<size_t>(n));
    }
    const bool due =
        ready.empty() ? SecondsSince(start) >= after_s : out.text.find(ready) != std::string::npos;
    if (sig != 0 && !signalled && due) {
      ::kill(pid, sig);
      sent = std::chrono::steady_clock::now();
      signalled = true;
    }
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.seconds = SecondsSince(start);
  if (signalled) out.seconds_after_signal = SecondsSince(sent);
  const bool expected_signal = sig == 0 || signalled;
  out.exit_code = !killed && expected_signal && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class SluiceTrainFailSafeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_train_fail_safe_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    WriteDatasetOptions options;
    options.sharding.records_per_shard = 1500;
    options.sharding.records_per_frame = 100;
    ASSERT_TRUE(WriteDataset(Env::Default(), dir_ + "/data", "train",
                             testing::MakeLearnableRecords(2000, 1, 40), options)
                    .ok());
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  std::string Data() const { return absl::StrCat("--data=", dir_, "/data --evaluate=false "); }
  std::string Cache() const { return dir_ + "/cache"; }
  std::string dir_;
};

// A stop of a slow simulated run used to end the training at once and then measure the
// report's compute ceiling on the same modelled device (2 s per modelled step, for tens of
// seconds). After a stop the ceilings come from the cache or are not measured.
TEST_F(SluiceTrainFailSafeTest, AStopOfASlowSimRunDoesNotMeasureTheCeilings) {
  const Output out = RunTrain(absl::StrCat(Data(),
                                           "--device=sim --sim-compute-us=2000000 --epochs=1 "
                                           "--progress-every=1 --refresh-ceilings"),
                              Cache(), SIGTERM, "epoch 1 step");
  ASSERT_EQ(out.exit_code, 128 + SIGTERM) << out.text;
  EXPECT_LT(out.seconds_after_signal, 10.0) << out.text;
  EXPECT_NE(out.text.find("ceilings not measured: the run was stopped"), std::string::npos)
      << out.text;
}

// --inject-delay=compute:99999999999 was accepted (28 h per step) and its busy-wait held the
// first SIGTERM.
TEST_F(SluiceTrainFailSafeTest, InjectedDelaysAreBoundedAndEndOnAStop) {
  Output out =
      RunTrain(absl::StrCat(Data(), "--device=cpu --inject-delay=compute:99999999999"), Cache());
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("--inject-delay: 99999999999 microseconds in \"compute:99999999999\" "
                          "is more than the maximum 10000000 (10 s per item)"),
            std::string::npos)
      << out.text;
  // A 10 s step, stopped 3 s in: the stop ends the delay.
  for (const std::string delay : {"compute:10000000", "read:10000000", "decompress:10000000"}) {
    out = RunTrain(
        absl::StrCat(Data(), "--device=cpu --epochs=1 --ceilings=false --inject-delay=", delay),
        Cache(), SIGTERM, "", 3.0);
    EXPECT_EQ(out.exit_code, 128 + SIGTERM) << delay << "\n" << out.text;
    EXPECT_LT(out.seconds_after_signal, 5.0) << delay << "\n" << out.text;
  }
}

// A FIFO that --metrics-out names is opened once, not per epoch: with no reader the run used
// to block in open() at the first epoch's end, for ever.
TEST_F(SluiceTrainFailSafeTest, AMetricsFifoWithoutAReaderIsRefusedAtOnce) {
  const std::string fifo = dir_ + "/metrics.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Output out = RunTrain(
      absl::StrCat(Data(), "--device=cpu --epochs=2 --ceilings=false --metrics-out=", fifo),
      Cache(), 0, "", 0, 60);
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat("--metrics-out ", fifo,
                                       ": a FIFO that no process is reading (start its "
                                       "reader first)")),
            std::string::npos)
      << out.text;
}

// The reader reads the first epoch's line and leaves: the second epoch's write fails with one
// line naming the path (it used to block in open() at epoch 2; never SIGPIPE's silent death).
TEST_F(SluiceTrainFailSafeTest, AMetricsFifoWhoseReaderLeavesEndsTheRunWithOneLine) {
  const std::string fifo = dir_ + "/metrics.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // not the run's
  ASSERT_GE(reader, 0);
  std::string first_line;
  std::thread read_one_line([&] {
    const auto start = std::chrono::steady_clock::now();
    char c;
    while (SecondsSince(start) < 60) {
      pollfd pfd = {reader, POLLIN, 0};
      if (::poll(&pfd, 1, 50) <= 0) continue;
      if (::read(reader, &c, 1) != 1) continue;
      first_line += c;
      if (c == '\n') break;
    }
    ::close(reader);
  });
  const Output out = RunTrain(absl::StrCat(Data(),
                                           "--device=cpu --epochs=3 --ceilings=false "
                                           "--inject-delay=compute:20000 --metrics-out=",
                                           fifo),
                              Cache(), 0, "", 0, 60);
  read_one_line.join();
  EXPECT_NE(first_line.find("\"epoch\":0"), std::string::npos) << first_line;
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find(absl::StrCat("--metrics-out ", fifo, ": its reader has gone")),
            std::string::npos)
      << out.text;
}

// The start-up memory check counts what the CPU backend allocates (its workspace, a copy of the
// first layer's weight gradients per extra compute thread, and the job's initial model state):
// 784,250000,10 is ~0.8 GB of parameters but ~3.2 GB in all, which ulimit -v 3000000 refuses at
// start with one line, not a std::bad_alloc mid-allocation.
TEST_F(SluiceTrainFailSafeTest, AModelBeyondTheAddressSpaceLimitIsRefusedAtStartNamingTheNeed) {
  const std::string cmd =
      absl::StrCat("ulimit -v 3000000 && ", SLUICE_TRAIN_BIN, " ", Data(),
                   "--device=cpu --compute-threads=2 --threads=1 --epochs=1 --ceilings=false "
                   "--layers=784,250000,10 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << text;
  EXPECT_NE(text.find("--layers 784,250000,10 (model, gradients, optimizer state, activations, "
                      "backend workspace and batch buffers) needs "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("available"), std::string::npos) << text;
  EXPECT_EQ(text.find("bad_alloc"), std::string::npos) << text;
}

// "--sim-compute-us: 1e+07 is not in [0, 1e+07]" for 10000001, and a layer size past int called
// "not a positive integer": each value and bound is printed exactly, and a size too large says
// so with the maximum.
TEST_F(SluiceTrainFailSafeTest, OutOfRangeValuesAreNamedExactlyWithTheirBound) {
  struct Case {
    const char* flags;
    const char* message;
  };
  for (const Case& c :
       {Case{"--device=sim --sim-compute-us=10000001",
             "--sim-compute-us: 10000001 is not in [0, 10000000] (microseconds per step"},
        Case{"--device=sim --sim-link-gbps=100000.5",
             "--sim-link-gbps: 100000.5 is not in [0.001, 100000] (GB/s"},
        Case{"--device=cpu --layers=784,99999999999,10",
             "--layers: '99999999999' in '784,99999999999,10' is above the maximum layer size "
             "1073741824"}}) {
    const Output out = RunTrain(absl::StrCat(Data(), "--epochs=1 ", c.flags), Cache());
    EXPECT_EQ(out.exit_code, 2) << c.flags << ": " << out.text;
    EXPECT_NE(out.text.find(c.message), std::string::npos) << c.flags << ": " << out.text;
  }
}

}  // namespace
}  // namespace sluice
