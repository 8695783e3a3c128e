// WriteDataset / Dataset / Manifest: determinism across thread counts, atomicity under injected
// failures, and manifest validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "common/env.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"
#include "storage/dataset_writer.h"
#include "tests/storage/test_records.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::MakeRecords;
using testing::Options;
using testing::U8Spec;

std::vector<std::string> Children(Env* env, const std::string& dir) {
  auto c = env->GetChildren(dir);
  return c.ok() ? *c : std::vector<std::string>{};
}

TEST(DatasetWriterTest, ThreadCountDoesNotChangeAnyByte) {
  const RecordArrays r = MakeRecords(U8Spec(28, 28), 3000);
  auto one = NewMemEnv();
  auto two = NewMemEnv();
  ASSERT_TRUE(WriteDataset(one.get(), "/d", "train", r, Options(1000, 64, 1)).ok());
  ASSERT_TRUE(WriteDataset(two.get(), "/d", "train", r, Options(1000, 64, 2)).ok());
  const auto names = Children(one.get(), "/d");
  ASSERT_EQ(names, Children(two.get(), "/d"));
  ASSERT_EQ(names.size(), 4u);  // 3 shards + manifest
  for (const std::string& n : names) {
    EXPECT_EQ(ReadFileToString(one.get(), "/d/" + n).value(),
              ReadFileToString(two.get(), "/d/" + n).value())
        << n;
  }
}

TEST(DatasetWriterTest, LastShardAndLastFrameMayBeShort) {
  auto env = NewMemEnv();
  const RecordArrays r = MakeRecords(U8Spec(4, 3), 10);
  auto m = WriteDataset(env.get(), "/d", "train", r, Options(4, 3));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->shards.size(), 3u);
  EXPECT_EQ(m->shards[2].record_count, 2u);
  EXPECT_EQ(m->shards[0].frame_count, 2u);  // 3 + 1
  auto ds = Dataset::Open(env.get(), "/d");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE(VerifyDataset(**ds).ok());
  auto back = ReadAllRecords(**ds, 2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->samples, r.samples);
  EXPECT_EQ(back->labels, r.labels);
}

TEST(DatasetWriterTest, InjectedEnospcLeavesNoValidLookingDataset) {
  const RecordArrays r = MakeRecords(U8Spec(8, 8), 500);
  // Total bytes of a good write, to sweep the failure point over all of it.
  auto probe = NewMemEnv();
  ASSERT_TRUE(WriteDataset(probe.get(), "/d", "train", r, Options(200, 32)).ok());
  uint64_t total = 0;
  for (const auto& n : Children(probe.get(), "/d")) total += *probe->GetFileSize("/d/" + n);
  for (uint64_t budget = 0; budget < total; budget += 97) {
    auto mem = NewMemEnv();
    FaultInjectionEnv env(mem.get());
    env.FailWritesAfter(static_cast<int64_t>(budget));
    absl::Status s = WriteDataset(&env, "/d", "train", r, Options(200, 32)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << "budget " << budget;
    for (const std::string& n : Children(mem.get(), "/d")) {
      ADD_FAILURE() << "budget " << budget << " left " << n << " behind";
    }
    EXPECT_EQ(Dataset::Open(mem.get(), "/d").status().code(), absl::StatusCode::kNotFound);
  }
}

TEST(DatasetWriterTest, FailedRenameLeavesNoValidLookingDataset) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  env.FailRenames(true);
  EXPECT_FALSE(WriteDataset(&env, "/d", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 2)).ok());
  EXPECT_TRUE(Children(mem.get(), "/d").empty());
}

TEST(DatasetWriterTest, RewritingASplitRemovesItsOldShards) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 9), Options(3, 2)).ok());
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "test", MakeRecords(U8Spec(2, 2), 2), Options(3, 2)).ok());
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 4), Options(3, 2)).ok());
  EXPECT_THAT(Children(env.get(), "/d"),
              ::testing::ElementsAre("test-00000.shard", "test.manifest.json",
                                     "train-00000.shard", "train-00001.shard",
                                     "train.manifest.json"));
}

TEST(DatasetWriterTest, InvalidOptionsAreInvalidArgument) {
  auto env = NewMemEnv();
  const RecordArrays r = MakeRecords(U8Spec(2, 2), 4);
  EXPECT_EQ(WriteDataset(env.get(), "/d", "train", r, Options(4, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteDataset(env.get(), "/d", "a/b", r, Options(4, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
  RecordArrays short_labels = r;
  short_labels.labels.pop_back();
  EXPECT_EQ(WriteDataset(env.get(), "/d", "train", short_labels, Options(4, 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ManifestTest, JsonIsCanonicalAndRoundTrips) {
  auto env = NewMemEnv();
  WriteDatasetOptions o = Options(4, 2);
  o.sources = {{"images", "a-images-idx3-ubyte.gz", 123, 0xabcdef}, {"labels", "l", 4, 5}};
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 3), 9), o);
  ASSERT_TRUE(m.ok());
  const std::string text = ReadFileToString(env.get(), "/d/train.manifest.json").value();
  EXPECT_EQ(text, m->ToJson());
  EXPECT_TRUE(absl::StartsWith(text,
                               "{\n  \"format\": \"sluice-dataset\",\n  \"version\": 1,\n  "
                               "\"split\": \"train\",\n  \"record_count\": 9,\n  \"sample\": {\n"
                               "    \"dtype\": \"u8\",\n    \"height\": 2,\n"));
  EXPECT_TRUE(absl::EndsWith(text, "}\n"));
  EXPECT_THAT(text, HasSubstr("\"xxh3\": \"0000000000abcdef\""));
  auto parsed = Manifest::FromJson(text, "/d/train.manifest.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToJson(), text);
}

TEST(ManifestTest, CountsThatDisagreeAreDataLoss) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 2));
  ASSERT_TRUE(m.ok());
  const std::string text = m->ToJson();
  auto bad = Manifest::FromJson(
      absl::StrReplaceAll(text, {{"\"record_count\": 9", "\"record_count\": 10"}}), "/m");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("record_count: 10, but the shards hold 9"));
  auto frames = Manifest::FromJson(
      absl::StrReplaceAll(text, {{"\"frame_count\": 2", "\"frame_count\": 3"}}), "/m");
  EXPECT_THAT(frames.status().message(), HasSubstr("shards[0].frame_count: 3, expected 2"));
  auto escape = Manifest::FromJson(
      absl::StrReplaceAll(text, {{"train-00000.shard", "../x.shard"}}), "/m");
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Manifest::FromJson(text.substr(0, text.size() / 2), "/m").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(DatasetTest, ShardFromAnotherDatasetIsDataLoss) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/a", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 2)).ok());
  ASSERT_TRUE(
      WriteDataset(env.get(), "/b", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 4)).ok());
  ASSERT_TRUE(env->RenameFile("/b/train-00001.shard", "/a/train-00001.shard").ok());
  auto ds = Dataset::Open(env.get(), "/a");
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE((*ds)->shard(0).ok());
  absl::Status s = (*ds)->shard(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/a/train-00001.shard: header: frame_count 1"));
}

TEST(DatasetTest, VerifyNamesTheCorruptShardFrameAndOffset) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(4, 4), 9), Options(4, 2)).ok());
  std::string shard = ReadFileToString(env.get(), "/d/train-00001.shard").value();
  shard[70] ^= 1;
  auto f = env->NewWritableFile("/d/train-00001.shard");
  ASSERT_TRUE((*f)->Append(shard).ok());
  auto ds = Dataset::Open(env.get(), "/d/train.manifest.json");
  ASSERT_TRUE(ds.ok());
  absl::Status s = VerifyDataset(**ds);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/d/train-00001.shard: frame 0 at byte offset 64: checksum"));
}

TEST(DatasetTest, OpenPicksTheDefaultSplitAndFindsSiblings) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "test", MakeRecords(U8Spec(2, 2), 3), Options(4, 2)).ok());
  auto only_test = Dataset::Open(env.get(), "/d");
  ASSERT_TRUE(only_test.ok());
  EXPECT_EQ((*only_test)->manifest().split, "test");
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 5), Options(4, 2)).ok());
  auto ds = Dataset::Open(env.get(), "/d");
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)->manifest().split, "train");
  EXPECT_EQ((*ds)->record_count(), 5u);
  EXPECT_EQ((*ds)->SiblingManifest("test").value(), "/d/test.manifest.json");
  EXPECT_EQ((*ds)->SiblingManifest("val").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Dataset::Open(env.get(), "/d", "val").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Dataset::Open(env.get(), "/empty").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sluice
