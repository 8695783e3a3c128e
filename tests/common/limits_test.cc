#include "common/limits.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(LimitsTest, ProductThatOverflowsIsAnErrorNotAWrappedSize) {
  auto p = CheckedProduct("records", {65536, 65536, 65536, 65536, 65536});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(p.status().message().find("records: 65536 x 65536"), std::string::npos);
  EXPECT_EQ(CheckedProduct("x", {3, 5, 7}).value(), 105u);
}

TEST(LimitsTest, MoreThanTheAvailableMemoryIsRefusedNamingTheSize) {
  absl::Status s = CheckMemory("a huge batch", uint64_t{1} << 62);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("a huge batch needs 4.0 EiB"), std::string::npos) << s;
  EXPECT_TRUE(CheckMemory("a byte", 1).ok());
}

TEST(LimitsTest, ThreadCountAboveFourTimesHardwareIsUsageErrorSayingTheBound) {
  EXPECT_TRUE(CheckThreadCount("threads", MaxThreads()).ok());
  absl::Status s = CheckThreadCount("threads", 10000);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--threads: 10000 is more than the maximum"), std::string::npos);
  EXPECT_NE(s.message().find("4 x the"), std::string::npos);
}

// StrCat's six digits printed "--sim-compute-us: 1e+07 is not in [0, 1e+07]" for 10000001.
TEST(LimitsTest, RangeErrorPrintsTheValueAndBoundsExactly) {
  EXPECT_EQ(CheckInRange("sim-compute-us", 10000001, 0, 1e7, "why").message(),
            "--sim-compute-us: 10000001 is not in [0, 10000000] (why)");
  EXPECT_EQ(CheckInRange("x", 100000.5, 0.001, 100000, "y").message(),
            "--x: 100000.5 is not in [0.001, 100000] (y)");
  EXPECT_EQ(ExactNumber(1e-9), "1e-09");
  EXPECT_EQ(ExactNumber(0.1), "0.1");
  EXPECT_EQ(ExactNumber(1.0000001), "1.0000001");
  EXPECT_EQ(ExactNumber(1e300), "1e+300");
  EXPECT_EQ(ExactNumber(-2.5), "-2.5");
  EXPECT_EQ(ExactNumber(1.0 / 0.0), "inf");
  EXPECT_TRUE(CheckInRange("x", 1e7, 0, 1e7, "y").ok());
}

// Under RLIMIT_AS the available memory is what is left of the limit, and the message says so.
TEST(LimitsTest, AddressSpaceLimitBoundsTheAvailableMemory) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const uint64_t limit = AddressSpaceInUse() + (uint64_t{64} << 20);
    struct rlimit rl = {limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(10);
    const AvailableMemory m = GetAvailableMemory();
    if (m.bytes > (uint64_t{64} << 20)) ::_exit(11);
    if (m.limited_by.find("ulimit -v") == std::string::npos) ::_exit(12);
    if (CheckMemory("x", uint64_t{128} << 20).ok()) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Under a process limit that leaves no room (`ulimit -u`), a pool that cannot start its
// threads must say so instead of waiting for them forever. Runs in a child: the limit is
// irreversible there, and root is exempt from it, so a root child becomes nobody first.
int ThreadsUnderAnExhaustedProcessLimit() {
  if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 3;
  struct rlimit none = {0, 0};
  if (::setrlimit(RLIMIT_NPROC, &none) != 0) return 4;
  absl::Status s = CheckThreadsCanStart(4, "the test's threads");
  if (s.code() != absl::StatusCode::kResourceExhausted) return 5;
  const std::string m(s.message());
  const bool names_it = m.find(
                            "cannot start the test's threads: 4 threads are needed and only "
                            "0 could start") != std::string::npos &&
                        m.find("ulimit -u is 0") != std::string::npos;
  return names_it ? 0 : 6;
}

TEST(LimitsTest, ThreadsThatCannotStartAreAnErrorNamingTheLimit) {
  EXPECT_TRUE(CheckThreadsCanStart(4, "the test's threads").ok());
  EXPECT_EXIT(std::_Exit(ThreadsUnderAnExhaustedProcessLimit()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace sluice
