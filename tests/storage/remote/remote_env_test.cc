// The Env that reads URLs (storage/remote/remote_env.h), without a network: byte counts as
// --cache-bytes takes them, the remote options, local paths passed to Env::Default(),
// and every write, delete, rename and lock of a remote path refused before any request.
// (Reads of remote objects are tested against a server on 127.0.0.1 in http_client_test.cc.)
#include "storage/remote/remote_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"

namespace sluice::remote {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseByteCountTest, PlainNumbersAndPowerOf1024Suffixes) {
  const std::vector<std::pair<const char*, uint64_t>> cases = {
      {"0", 0},
      {"1024", 1024},
      {"1k", 1024},
      {"1K", 1024},
      {"512M", uint64_t{512} << 20},
      {"512m", uint64_t{512} << 20},
      {"16G", uint64_t{16} << 30},
      {"2T", uint64_t{2} << 40},
      {"0G", 0},
      {"18446744073709551615", ~uint64_t{0}},
      // The largest counts each suffix can hold.
      {"16777215T", ((uint64_t{1} << 24) - 1) << 40},
      {"17179869183G", ((uint64_t{1} << 34) - 1) << 30},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<uint64_t> got = ParseByteCount(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status();
    EXPECT_EQ(*got, want) << text;
  }
}

TEST(ParseByteCountTest, MalformedAndOverflowingCountsAreRefusedNamingTheText) {
  for (const char* text :
       {"", "G", "k", "-1", "-1G", "1.5G", "1e9", "16GB", "16GiB", "0x10", "K16", "16P", "ten",
        "99999999999T", "16777216T", "17179869184G", "18446744073709551616"}) {
    absl::StatusOr<uint64_t> got = ParseByteCount(text);
    ASSERT_FALSE(got.ok()) << text << " gave " << *got;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(absl::StrCat("\"", text, "\"")));
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("16G"));
  }
}

class ConfigureRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = CurrentRemoteOptions(); }
  void TearDown() override { ConfigureRemote(saved_); }
  RemoteOptions saved_;
};

TEST_F(ConfigureRemoteTest, DefaultsAreDocumented) {
  const RemoteOptions o = CurrentRemoteOptions();
  EXPECT_EQ(o.cache_bytes, kDefaultCacheBytes);
  EXPECT_EQ(o.cache_dir, "");
  EXPECT_EQ(kDefaultCacheBytes, uint64_t{16} << 30);
  EXPECT_EQ(kMaxReadConcurrency, 256);
}

TEST_F(ConfigureRemoteTest, OptionsSetAreTheCurrentOnes) {
  RemoteOptions o;
  o.cache_dir = "/tmp/some-cache";
  o.cache_bytes = 12345;
  ConfigureRemote(o);
  RemoteOptions got = CurrentRemoteOptions();
  EXPECT_EQ(got.cache_dir, "/tmp/some-cache");
  EXPECT_EQ(got.cache_bytes, 12345u);

  o.cache_dir = "";
  o.cache_bytes = 0;  // no cache
  ConfigureRemote(o);
  got = CurrentRemoteOptions();
  EXPECT_EQ(got.cache_dir, "");
  EXPECT_EQ(got.cache_bytes, 0u);
}

class UrlEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = absl::StrCat(::testing::TempDir(), "url_env_XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(UrlEnvTest, IsOneProcessWideEnv) {
  ASSERT_NE(UrlEnv(), nullptr);
  EXPECT_EQ(UrlEnv(), UrlEnv());
  EXPECT_NE(UrlEnv(), Env::Default());
}

TEST_F(UrlEnvTest, LocalPathsBehaveAsTheDefaultEnv) {
  Env* env = UrlEnv();
  const std::string sub = dir_ + "/a/b";
  ASSERT_TRUE(env->CreateDirs(sub).ok());
  EXPECT_TRUE(fs::is_directory(sub));

  const std::string path = sub + "/data.bin";
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> w = env->NewWritableFile(path);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Append("hello, ").ok());
    ASSERT_TRUE((*w)->Append("world").ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  EXPECT_TRUE(env->FileExists(path));
  EXPECT_FALSE(env->FileExists(sub + "/missing"));
  absl::StatusOr<uint64_t> size = env->GetFileSize(path);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, 12u);

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> r = env->NewRandomAccessFile(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Size(), 12u);
  EXPECT_EQ((*r)->path(), path);
  (*r)->WillRead(0, 12);  // a hint; nothing to fetch locally
  char buf[16] = {};
  absl::StatusOr<size_t> n = (*r)->Read(7, 16, buf);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), "world");

  absl::StatusOr<std::string> whole = ReadFileToString(env, path);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, "hello, world");

  ASSERT_TRUE(WriteFileAtomically(env, sub + "/other.bin", "x").ok());
  absl::StatusOr<std::vector<std::string>> children = env->GetChildren(sub);
  ASSERT_TRUE(children.ok()) << children.status();
  EXPECT_THAT(*children, ElementsAre("data.bin", "other.bin"));

  ASSERT_TRUE(env->RenameFile(sub + "/other.bin", sub + "/renamed.bin").ok());
  EXPECT_TRUE(fs::exists(sub + "/renamed.bin"));
  ASSERT_TRUE(env->DeleteFile(sub + "/renamed.bin").ok());
  EXPECT_FALSE(fs::exists(sub + "/renamed.bin"));
  EXPECT_TRUE(env->SyncDir(sub).ok());

  {
    absl::StatusOr<std::unique_ptr<LockedFile>> lock = env->LockFile(sub + "/.lock");
    ASSERT_TRUE(lock.ok()) << lock.status();
    EXPECT_TRUE(fs::exists(sub + "/.lock"));
    // Held: a second lock in this process is refused as another process's would be.
    EXPECT_EQ(env->LockFile(sub + "/.lock").status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_TRUE(env->IsSpecialFile("/dev/null"));
  EXPECT_FALSE(env->IsSpecialFile(path));

  // A missing local file is the default Env's kNotFound, not a remote error.
  EXPECT_EQ(env->NewRandomAccessFile(sub + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

void ExpectRefused(const absl::Status& s, const std::string& path, const char* what) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << " " << path << ": " << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(path)) << what;
  EXPECT_THAT(std::string(s.message()), HasSubstr("upload")) << what;
  EXPECT_THAT(std::string(s.message()), HasSubstr("client")) << what;
}

TEST_F(UrlEnvTest, WritingARemotePathIsRefusedNamingItAndSayingToUpload) {
  Env* env = UrlEnv();
  const std::string local = dir_ + "/x.shard";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), local, "x").ok());
  for (const std::string& path :
       {std::string("s3://bucket/prefix/train-00000.shard"), std::string("S3://bucket/p/x"),
        std::string("https://data.example.com/ds/train.manifest.json"),
        std::string("http://127.0.0.1:1/ds")}) {
    ExpectRefused(env->NewWritableFile(path).status(), path, "NewWritableFile");
    ExpectRefused(env->NewTemporaryFile(path).status(), path, "NewTemporaryFile");
    ExpectRefused(env->NewAppendableFile(path).status(), path, "NewAppendableFile");
    ExpectRefused(env->CreateDirs(path), path, "CreateDirs");
    ExpectRefused(env->DeleteFile(path), path, "DeleteFile");
    ExpectRefused(env->RenameFile(local, path), path, "RenameFile");
    ExpectRefused(env->LockFile(path).status(), path, "LockFile");
    ExpectRefused(env->SyncDir(path), path, "SyncDir");
    EXPECT_FALSE(env->IsSpecialFile(path)) << path;
  }
  // Nothing was moved or made locally.
  EXPECT_EQ(*ReadFileToString(Env::Default(), local), "x");
  EXPECT_FALSE(fs::exists("s3:"));
  EXPECT_FALSE(fs::exists("https:"));
}

TEST_F(UrlEnvTest, RenamingARemotePathToALocalOneIsRefusedAndMovesNothing) {
  const std::string local = dir_ + "/y.shard";
  const absl::Status s = UrlEnv()->RenameFile("s3://bucket/x.shard", local);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("upload"));
  EXPECT_FALSE(fs::exists(local));
}

// Disabled: storage/remote/remote_env.cc's RenameFile names `to` even when only `from` is
// remote, so the message reads "<local path>: cannot rename: sluice reads object storage but
// never writes it" without naming the object (see the report).
TEST_F(UrlEnvTest, RenamingARemotePathToALocalOneNamesTheRemotePath) {
  const absl::Status s = UrlEnv()->RenameFile("s3://bucket/x.shard", dir_ + "/y.shard");
  EXPECT_THAT(std::string(s.message()), HasSubstr("s3://bucket/x.shard"));
}

TEST_F(UrlEnvTest, AMalformedRemotePathIsRefusedBeforeAnyRequest) {
  for (const char* path : {"s3:///key", "https://user:pw@host/x", "s3://bucket/key?versionId=1"}) {
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(path);
    ASSERT_FALSE(f.ok()) << path;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_EQ(UrlEnv()->GetFileSize(path).status().code(), absl::StatusCode::kInvalidArgument)
        << path;
    EXPECT_EQ(UrlEnv()->GetChildren(path).status().code(), absl::StatusCode::kInvalidArgument)
        << path;
  }
}

}  // namespace
}  // namespace sluice::remote
