// Remote dataset paths (storage/remote/url.h): which paths are remote, how s3:// and http(s)://
// paths split into bucket (or host) and key, the paths refused (queries, fragments, users in the
// authority, no bucket), and S3's Signature V4 percent-encoding.
#include "storage/remote/url.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::remote {
namespace {

using ::testing::HasSubstr;

TEST(IsRemotePathTest, SchemesOfObjectStoresAreRemoteInAnyCase) {
  for (const char* path : {"s3://bucket/key", "S3://bucket/key", "http://host/p", "HTTP://host",
                           "https://host:8443/a/b", "HtTpS://host/x", "s3://"}) {
    EXPECT_TRUE(IsRemotePath(path)) << path;
  }
}

TEST(IsRemotePathTest, LocalPathsAndOtherSchemesAreNotRemote) {
  for (const char* path : {"", "/data/train.shard", "data/s3://x", "s3:/bucket/key", "s3//bucket",
                           "file:///data/x", "ftp://host/x", "https:/host/x", "./https://h/x"}) {
    EXPECT_FALSE(IsRemotePath(path)) << path;
  }
}

TEST(ParseObjectPathTest, S3PathSplitsIntoBucketAndKey) {
  absl::StatusOr<ObjectPath> o = ParseObjectPath("s3://my-bucket/prefix/train-00000.shard");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheme, Scheme::kS3);
  EXPECT_EQ(o->bucket, "my-bucket");
  EXPECT_EQ(o->key, "prefix/train-00000.shard");
}

TEST(ParseObjectPathTest, BucketAloneHasAnEmptyKeyAndTrailingSlashesAreDropped) {
  for (const char* path : {"s3://bucket", "s3://bucket/", "s3://bucket///"}) {
    absl::StatusOr<ObjectPath> o = ParseObjectPath(path);
    ASSERT_TRUE(o.ok()) << path << ": " << o.status();
    EXPECT_EQ(o->bucket, "bucket") << path;
    EXPECT_EQ(o->key, "") << path;
  }
  absl::StatusOr<ObjectPath> dir = ParseObjectPath("s3://bucket/datasets/mnist//");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->key, "datasets/mnist");
}

TEST(ParseObjectPathTest, HttpPathsKeepTheAuthorityWithItsPortAsTheBucket) {
  absl::StatusOr<ObjectPath> s = ParseObjectPath("https://data.example.com:8443/ds/train.json");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scheme, Scheme::kHttps);
  EXPECT_EQ(s->bucket, "data.example.com:8443");
  EXPECT_EQ(s->key, "ds/train.json");

  absl::StatusOr<ObjectPath> p = ParseObjectPath("http://127.0.0.1:8080/x");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scheme, Scheme::kHttp);
  EXPECT_EQ(p->bucket, "127.0.0.1:8080");
  EXPECT_EQ(p->key, "x");
}

TEST(ParseObjectPathTest, SchemeIsMatchedInAnyCase) {
  absl::StatusOr<ObjectPath> o = ParseObjectPath("S3://Bucket/Key");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->scheme, Scheme::kS3);
  EXPECT_EQ(o->bucket, "Bucket");
  EXPECT_EQ(o->key, "Key");
  absl::StatusOr<ObjectPath> h = ParseObjectPath("HTTPS://host/k");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->scheme, Scheme::kHttps);
}

TEST(ParseObjectPathTest, AnAtSignInTheKeyIsNotAUser) {
  absl::StatusOr<ObjectPath> o = ParseObjectPath("https://host/a@b/c");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->bucket, "host");
  EXPECT_EQ(o->key, "a@b/c");
}

TEST(ParseObjectPathTest, QueriesAndFragmentsAreRefusedNamingThePath) {
  for (const char* path : {"s3://bucket/key?versionId=3", "https://host/p?X-Amz-Signature=abc",
                           "http://host/p#part", "s3://bucket?list"}) {
    absl::StatusOr<ObjectPath> o = ParseObjectPath(path);
    ASSERT_FALSE(o.ok()) << path;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(o.status().message()), HasSubstr(path));
    EXPECT_THAT(std::string(o.status().message()), HasSubstr("query or fragment"));
  }
}

TEST(ParseObjectPathTest, AUserInTheAuthorityIsRefused) {
  for (const char* path : {"https://user@host/p", "https://user:pw@host/p", "s3://me@bucket/k",
                           "http://a@127.0.0.1:9000"}) {
    absl::StatusOr<ObjectPath> o = ParseObjectPath(path);
    ASSERT_FALSE(o.ok()) << path;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(o.status().message()), HasSubstr("AWS_ACCESS_KEY_ID"));
  }
}

// The refusal exists because reports print paths; its own message should not print the
// password it refuses. Disabled: storage/remote/url.cc prints the whole path (see the report).
TEST(ParseObjectPathTest, RefusingAPasswordInTheUrlDoesNotPrintThePassword) {
  absl::StatusOr<ObjectPath> o = ParseObjectPath("https://alice:hunter2@host/data/train.shard");
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(std::string(o.status().message()), ::testing::Not(HasSubstr("hunter2")));
}

TEST(ParseObjectPathTest, AnEmptyBucketOrHostIsRefused) {
  for (const char* path : {"s3://", "s3:///key", "https://", "https:///p", "http:///"}) {
    absl::StatusOr<ObjectPath> o = ParseObjectPath(path);
    ASSERT_FALSE(o.ok()) << path;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(std::string(o.status().message()), HasSubstr("expected")) << path;
  }
  EXPECT_THAT(std::string(ParseObjectPath("s3:///k").status().message()),
              HasSubstr("s3://BUCKET/PREFIX"));
}

TEST(ParseObjectPathTest, ALocalPathIsRefused) {
  absl::StatusOr<ObjectPath> o = ParseObjectPath("/data/train.shard");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(o.status().message()), HasSubstr("/data/train.shard"));
  EXPECT_THAT(std::string(o.status().message()), HasSubstr("s3://, https:// or http://"));
}

TEST(UriEncodeTest, UnreservedCharactersAreKept) {
  const std::string unreserved =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
  EXPECT_EQ(UriEncode(unreserved, false), unreserved);
  EXPECT_EQ(UriEncode(unreserved, true), unreserved);
  EXPECT_EQ(UriEncode("", true), "");
}

TEST(UriEncodeTest, EveryOtherByteBecomesUpperCaseHex) {
  EXPECT_EQ(UriEncode("a b", false), "a%20b");
  EXPECT_EQ(UriEncode("a+b=c&d", false), "a%2Bb%3Dc%26d");
  EXPECT_EQ(UriEncode("100%", false), "100%25");
  EXPECT_EQ(UriEncode("*!'()", false), "%2A%21%27%28%29");
  EXPECT_EQ(UriEncode("?#[]@:", false), "%3F%23%5B%5D%40%3A");
  EXPECT_EQ(UriEncode("\xc3\xa9", false), "%C3%A9");  // UTF-8 e-acute
  EXPECT_EQ(UriEncode(std::string("\x00\xff\x7f", 3), false), "%00%FF%7F");
}

TEST(UriEncodeTest, SlashIsKeptOnlyWhenAsked) {
  EXPECT_EQ(UriEncode("dir/sub dir/file.shard", true), "dir/sub%20dir/file.shard");
  EXPECT_EQ(UriEncode("dir/sub dir/file.shard", false), "dir%2Fsub%20dir%2Ffile.shard");
}

}  // namespace
}  // namespace sluice::remote
