#include "common/file_lock.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/mem_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  char tmpl[] = "/tmp/sluice_file_lock_test_XXXXXX";
  char* d = ::mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d;
}

// Both Envs: POSIX (flock, in a temporary directory) and in-memory.
class FileLockTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) {
      env_ = Env::Default();
      dir_ = TempDir();
    } else {
      mem_ = NewMemEnv();
      env_ = mem_.get();
      dir_ = "/ds";
    }
  }
  void TearDown() override {
    if (GetParam()) std::system(("rm -rf " + dir_).c_str());
  }
  std::string LockPath() const { return JoinPath(dir_, FileLock::kFileName); }

  std::unique_ptr<Env> mem_;
  Env* env_ = nullptr;
  std::string dir_;
};

TEST_P(FileLockTest, SecondWriterIsRefusedAtOnceNamingPidHostAndPurpose) {
  auto first = FileLock::Acquire(env_, dir_, "sluice-shard create (split train)");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = FileLock::Acquire(env_, dir_, "sluice-shard create (split test)");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  const LockHolder me = CurrentProcessHolder("");
  const std::string msg(second.status().message());
  EXPECT_THAT(msg, HasSubstr(LockPath() + ": cannot start sluice-shard create (split test)"));
  EXPECT_THAT(
      msg, HasSubstr(absl::StrCat("locked by pid ", ::getpid(), " on host ", me.host, " since ")));
  EXPECT_THAT(msg, HasSubstr("(sluice-shard create (split train))"));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
}

TEST_P(FileLockTest, LockIsReleasedAndItsFileRemovedWhenTheHolderIsDestroyed) {
  {
    auto first = FileLock::Acquire(env_, dir_, "first");
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_TRUE(env_->FileExists(LockPath()));
  }
  EXPECT_FALSE(env_->FileExists(LockPath()));
  auto second = FileLock::Acquire(env_, dir_, "second");
  ASSERT_TRUE(second.ok()) << second.status();
  auto text = ReadFileToString(env_, LockPath());
  ASSERT_TRUE(text.ok()) << text.status();
  auto holder = ParseLockFileContents(*text, LockPath());
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->pid, ::getpid());
  EXPECT_EQ(holder->purpose, "second");
}

TEST_P(FileLockTest, StaleLockFileOfADeadProcessDoesNotBlock) {
  // What a killed holder leaves: the text, but no flock.
  LockHolder dead{999999, "elsewhere", "2001-01-01T00:00:00Z", "sluice-train"};
  ASSERT_TRUE(env_->CreateDirs(dir_).ok());
  ASSERT_TRUE(WriteFileAtomically(env_, LockPath(), LockFileContents(dead)).ok());
  auto lock = FileLock::Acquire(env_, dir_, "after the crash");
  ASSERT_TRUE(lock.ok()) << lock.status();
  auto holder = ParseLockFileContents(ReadFileToString(env_, LockPath()).value(), LockPath());
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->pid, ::getpid()) << "the stale text is replaced";
  EXPECT_EQ(holder->purpose, "after the crash");
}

TEST_P(FileLockTest, HolderThatHasNotWrittenItsDetailsIsStillALock) {
  ASSERT_TRUE(env_->CreateDirs(dir_).ok());
  auto raw = env_->LockFile(LockPath());  // locked, file still empty
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto second = FileLock::Acquire(env_, dir_, "second");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("has not written its pid and host yet"));
}

INSTANTIATE_TEST_SUITE_P(Envs, FileLockTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Posix" : "Mem";
                         });

// A link planted under the lock's name (by anyone who can write to a shared dataset
// directory) must not make sluice write through it: not to the file it names, and not to a
// new file outside the directory when it dangles.
TEST(FileLockLinkTest, ALinkAtTheLockPathIsRefusedAndWhatItNamesIsUntouched) {
  const std::string dir = TempDir();
  const std::string victim = JoinPath(dir, "victim.txt");
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), victim, "precious\n").ok());
  const std::string lock = JoinPath(dir, FileLock::kFileName);
  ASSERT_EQ(::symlink(victim.c_str(), lock.c_str()), 0);
  absl::StatusOr<std::unique_ptr<FileLock>> held = FileLock::Acquire(Env::Default(), dir, "test");
  ASSERT_FALSE(held.ok());
  EXPECT_EQ(held.status().code(), absl::StatusCode::kFailedPrecondition) << held.status();
  EXPECT_THAT(held.status().message(), HasSubstr("is a symbolic link"));
  EXPECT_EQ(*ReadFileToString(Env::Default(), victim), "precious\n");

  const std::string outside = JoinPath(dir, "created-outside");
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), lock.c_str()), 0);
  EXPECT_FALSE(FileLock::Acquire(Env::Default(), dir, "test").ok());
  EXPECT_NE(::access(outside.c_str(), F_OK), 0) << "the dangling link created " << outside;
  std::system(("rm -rf " + dir).c_str());
}

TEST(FileLockLinkTest, AFifoAtTheLockPathIsRefusedWithoutBlocking) {
  const std::string dir = TempDir();
  const std::string lock = JoinPath(dir, FileLock::kFileName);
  ASSERT_EQ(::mkfifo(lock.c_str(), 0644), 0);
  absl::StatusOr<std::unique_ptr<FileLock>> held = FileLock::Acquire(Env::Default(), dir, "test");
  ASSERT_FALSE(held.ok());
  EXPECT_THAT(held.status().message(), HasSubstr("is not a regular file"));
  std::system(("rm -rf " + dir).c_str());
}

TEST(FileLockFormatTest, ContentsAreTheFiveLinesOfTheFormatDoc) {
  LockHolder h{41523, "trainbox-3", "2024-05-01T12:00:00Z", "sluice-shard create\n(split train)"};
  EXPECT_EQ(LockFileContents(h),
            "sluice-lock 1\npid 41523\nhost trainbox-3\nstarted 2024-05-01T12:00:00Z\n"
            "purpose sluice-shard create (split train)\n");
  auto parsed = ParseLockFileContents(LockFileContents(h), "/l");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->pid, 41523);
  EXPECT_EQ(parsed->host, "trainbox-3");
  EXPECT_EQ(parsed->started, "2024-05-01T12:00:00Z");
  EXPECT_EQ(parsed->purpose, "sluice-shard create (split train)");
  EXPECT_EQ(ParseLockFileContents("sluice-lock 2\npid 1\nhost h\nstarted s\npurpose p\n", "/l")
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseLockFileContents("", "/l").status().code(), absl::StatusCode::kDataLoss);
}

// A lock held by another process is refused with that process's pid; once the process is
// killed (no chance to clean up), the kernel drops its flock and the lock is free again.
TEST(FileLockProcessTest, LockOfAKilledProcessIsFreeAgain) {
  const std::string dir = TempDir();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = FileLock::Acquire(Env::Default(), dir, "child");
    const char c = lock.ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto refused = FileLock::Acquire(Env::Default(), dir, "parent");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("locked by pid ", child, " ")));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(Env::Default()->FileExists(JoinPath(dir, FileLock::kFileName)))
      << "a killed holder leaves its file";
  auto taken = FileLock::Acquire(Env::Default(), dir, "parent");
  EXPECT_TRUE(taken.ok()) << taken.status();
  taken->reset();
  ::close(ready[0]);
  ::close(ready[1]);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace sluice
