#include "common/env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/testing/fault_injection_env.h"
#include "common/testing/mem_env.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/sluice_env_test_XXXXXX";
  char* d = ::mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d;
}

void ExerciseEnv(Env* env, const std::string& dir) {
  ASSERT_TRUE(env->CreateDirs(JoinPath(dir, "a/b")).ok());
  const std::string path = JoinPath(dir, "a/b/file");
  ASSERT_TRUE(WriteFileAtomically(env, path, "hello world").ok());
  EXPECT_TRUE(env->FileExists(path));
  EXPECT_FALSE(env->FileExists(path + ".tmp"));
  auto size = env->GetFileSize(path);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 11u);
  auto file = env->NewRandomAccessFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  char buf[16];
  auto n = (*file)->Read(6, 16, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "world");
  auto children = env->GetChildren(JoinPath(dir, "a/b"));
  ASSERT_TRUE(children.ok());
  EXPECT_EQ(*children, std::vector<std::string>{"file"});
  auto missing = env->NewRandomAccessFile(JoinPath(dir, "nope"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(EnvTest, PosixEnvReadsWritesAndRenames) { ExerciseEnv(Env::Default(), TempDir()); }

TEST(EnvTest, MemEnvBehavesLikePosix) {
  auto env = NewMemEnv();
  ExerciseEnv(env.get(), "/mem");
}

TEST(EnvTest, InjectedEnospcFailsAtomicWriteAndLeavesNothing) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  env.FailWritesAfter(4);
  absl::Status s = WriteFileAtomically(&env, "/d/file", "more than four bytes");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("No space left"), std::string::npos);
  EXPECT_FALSE(env.FileExists("/d/file"));
  EXPECT_FALSE(env.FileExists("/d/file.tmp"));
}

TEST(EnvTest, FailedRenameKeepsOldContents) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  ASSERT_TRUE(WriteFileAtomically(&env, "/d/file", "old").ok());
  env.FailRenames(true);
  EXPECT_FALSE(WriteFileAtomically(&env, "/d/file", "new").ok());
  auto contents = ReadFileToString(&env, "/d/file");
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(*contents, "old");
}

bool IsCharacterDevice(const char* path) {
  struct stat st;
  return ::lstat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

// --report-json=/dev/null (or /dev/full, a FIFO, /dev/stdout) must write to the device, not
// rename a regular file over it.
TEST(EnvTest, AtomicWriteToASpecialFileWritesInPlaceAndNeverReplacesIt) {
  ASSERT_TRUE(IsCharacterDevice("/dev/null"));
  EXPECT_TRUE(Env::Default()->IsSpecialFile("/dev/null"));
  EXPECT_TRUE(WriteFileAtomically(Env::Default(), "/dev/null", "report\n").ok());
  EXPECT_TRUE(IsCharacterDevice("/dev/null"));
  if (IsCharacterDevice("/dev/full")) {
    absl::Status full = WriteFileAtomically(Env::Default(), "/dev/full", "report\n");
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
    EXPECT_TRUE(IsCharacterDevice("/dev/full"));
  }
}

// A link planted under the temporary's name must not be written through.
TEST(EnvTest, AtomicWriteNeverWritesThroughALinkAtItsTemporaryName) {
  const std::string dir = TempDir();
  const std::string victim = JoinPath(dir, "victim");
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), victim, "precious").ok());
  const std::string path = JoinPath(dir, "report.json");
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, "{}").ok());
  EXPECT_EQ(*ReadFileToString(Env::Default(), victim), "precious");
  EXPECT_EQ(*ReadFileToString(Env::Default(), path), "{}");
  EXPECT_FALSE(Env::Default()->FileExists(path + ".tmp"));
  EXPECT_FALSE(Env::Default()->IsSpecialFile(path));
  std::system(("rm -rf " + dir).c_str());
}

// A FIFO that no process has opened for reading: the write is refused at once, and the message
// said "(its reader has gone)" of a FIFO that never had one (report_html to a fresh FIFO).
TEST(EnvTest, AFifoThatNeverHadAReaderIsNotSaidToHaveLostIt) {
  const std::string fifo = JoinPath(TempDir(), "never-read.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const absl::Status s = WriteFileAtomically(Env::Default(), fifo, "<html>");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string message(s.message());
  EXPECT_EQ(message.find("has gone"), std::string::npos) << message;
  EXPECT_NE(message.find(": a FIFO that no process is reading (no reader: a FIFO needs a reader "
                         "started before the run"),
            std::string::npos)
      << message;
  ::unlink(fifo.c_str());
}

TEST(PathTest, DirAndBaseNames) {
  EXPECT_EQ(DirName("/a/b/c"), "/a/b");
  EXPECT_EQ(DirName("c"), ".");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_EQ(BaseName("/a/b/c/"), "c");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
}

}  // namespace
}  // namespace sluice
