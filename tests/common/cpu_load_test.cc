// Other processes' CPU time (common/cpu_load.h): the parser counts the busy columns of the
// CPUs in the mask only, and a child process spinning while this one sleeps is counted as
// another process's cores.
#include "common/cpu_load.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace sluice {
namespace {

constexpr char kProcStat[] =
    "cpu  500 10 200 9000 30 5 7 11 0 0\n"
    "cpu0 100 1 50 4000 10 1 2 3 0 0\n"
    "cpu1 400 9 150 5000 20 4 5 8 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

TEST(CpuLoad, BusyTicksAreTheBusyColumnsOfTheMaskedCpus) {
  // cpu1: user 400 + nice 9 + system 150 + irq 4 + softirq 5 + steal 8; idle and iowait not.
  EXPECT_EQ(BusyTicksFromProcStat(kProcStat, {false, true}), 576);
  EXPECT_EQ(BusyTicksFromProcStat(kProcStat, {true, true}), 576 + 157);
  EXPECT_EQ(BusyTicksFromProcStat(kProcStat, {true}), 157);  // cpu1 is past the mask's end
  EXPECT_FALSE(BusyTicksFromProcStat(kProcStat, {false, false}).has_value());
  EXPECT_FALSE(BusyTicksFromProcStat("intr 1 2 3\n", {true}).has_value());
  // An old kernel's line without the steal column still parses.
  EXPECT_EQ(BusyTicksFromProcStat("cpu0 1 2 3 4 5 6 7\n", {true}), 1 + 2 + 3 + 6 + 7);
}

TEST(CpuLoad, AChildSpinningWhileThisProcessSleepsIsAnotherProcesssCore) {
  const CpuLoadSnapshot before = TakeCpuLoadSnapshot();
  if (!before.busy_ns) GTEST_SKIP() << "/proc/stat has no per-CPU lines on this machine";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < until) x = x + 1;
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const std::optional<double> other = OtherCoresBusy(before, TakeCpuLoadSnapshot());
  ASSERT_TRUE(other.has_value());
  // The child held about one core for the span (less if the machine is oversubscribed).
  EXPECT_GE(*other, 0.3);
}

TEST(CpuLoad, NoCountersNoClaim) {
  CpuLoadSnapshot a, b;
  b.wall_ns = 1'000'000'000;
  EXPECT_FALSE(OtherCoresBusy(a, b).has_value());
  a.busy_ns = 0;
  b.busy_ns = 2'000'000'000;
  b.process_cpu_ns = 500'000'000;
  EXPECT_DOUBLE_EQ(*OtherCoresBusy(a, b), 1.5);
  EXPECT_DOUBLE_EQ(ProcessCoresBusy(a, b), 0.5);
  b.process_cpu_ns = 3'000'000'000;  // this process alone: never below 0
  EXPECT_DOUBLE_EQ(*OtherCoresBusy(a, b), 0.0);
}

}  // namespace
}  // namespace sluice
