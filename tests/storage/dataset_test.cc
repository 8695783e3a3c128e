// WriteDataset / Dataset / Manifest: determinism across thread counts, atomicity under injected
// failures, and manifest validation.
#include "storage/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/checksum.h"
#include "common/env.h"
#include "common/file_lock.h"
#include "common/testing/fault_injection_env.h"
#include "common/testing/mem_env.h"
#include "nlohmann/json.hpp"
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

// A RecordSource (a NumPy array read in place, python/src/writer.cc) is read one frame at a
// time, never whole, and gives the bytes the same records in memory give, for any thread count.
TEST(DatasetWriterTest, RecordSourceIsReadFrameByFrameAndWritesTheBytesOfRecordArrays) {
  const RecordArrays r = MakeRecords(U8Spec(28, 28), 3000);
  RecordSource source;
  source.spec = r.spec;
  source.count = r.count;
  source.labels = r.labels;
  std::atomic<uint32_t> largest_read{0};
  std::atomic<uint64_t> records_read{0};
  source.read_samples = [&](uint64_t first, uint32_t n, char* out) {
    std::memcpy(out, r.samples.data() + first * r.spec.sample_bytes(),
                size_t{n} * r.spec.sample_bytes());
    records_read += n;
    uint32_t seen = largest_read.load();
    while (n > seen && !largest_read.compare_exchange_weak(seen, n)) {
    }
  };
  auto from_arrays = NewMemEnv();
  ASSERT_TRUE(WriteDataset(from_arrays.get(), "/d", "train", r, Options(1000, 64, 1)).ok());
  for (int threads : {1, 2}) {
    records_read = 0;
    auto from_source = NewMemEnv();
    auto m = WriteDataset(from_source.get(), "/d", "train", source, Options(1000, 64, threads));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(records_read.load(), 3000u);  // each record read once
    EXPECT_LE(largest_read.load(), 64u);    // a frame at a time
    const auto names = Children(from_arrays.get(), "/d");
    ASSERT_EQ(names, Children(from_source.get(), "/d"));
    for (const std::string& n : names) {
      EXPECT_EQ(ReadFileToString(from_arrays.get(), "/d/" + n).value(),
                ReadFileToString(from_source.get(), "/d/" + n).value())
          << n << " with " << threads << " threads";
    }
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

TEST(DatasetWriterTest, SplitNamesWithControlCharactersOrInvalidUtf8AreRefused) {
  // "a/b" and "../evil" were refused, but an ANSI escape was written into the file names and
  // reached every terminal that printed the split.
  auto env = NewMemEnv();
  const RecordArrays r = MakeRecords(U8Spec(4, 3), 10);
  const std::vector<std::string> names = {"a/b",        "../evil",   "x\x1b[31my",
                                          {"n\0ul", 4}, "tab\there", "bad\xff"};
  for (const std::string& bad : names) {
    auto m = WriteDataset(env.get(), "/d", bad, r, Options(4, 3));
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(m.status().message(), ::testing::HasSubstr("expected a plain name such as train"));
    EXPECT_EQ(m.status().message().find('\x1b'), absl::string_view::npos) << m.status();
    EXPECT_FALSE(CheckSplitName(bad).ok()) << bad;
  }
  EXPECT_TRUE(CheckSplitName("train").ok());
  EXPECT_TRUE(CheckSplitName("v\xc3\xa1lido-2").ok());  // UTF-8 letters are plain
}

TEST(DatasetWriterTest, SplitNamesNoReaderAcceptsAreRefusedBeforeAnythingIsWritten) {
  // "." and ".." were written (".manifest.json" beside "...manifest.json") and every reader
  // then refused them; a 300-byte name failed half way with "File name too long".
  auto env = NewMemEnv();
  const RecordArrays r = MakeRecords(U8Spec(4, 3), 10);
  const std::vector<std::string> names = {".", "..", std::string(kMaxSplitNameBytes + 1, 'a'),
                                          std::string(300, 'a')};
  for (const std::string& bad : names) {
    auto m = WriteDataset(env.get(), "/d", bad, r, Options(4, 3));
    ASSERT_FALSE(m.ok()) << bad.size();
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Children(env.get(), "/d").empty()) << bad.size() << " bytes: nothing is created";
    EXPECT_FALSE(CheckSplitName(bad).ok()) << bad.size();
  }
  EXPECT_THAT(CheckSplitName("..").message(), HasSubstr("expected a plain name such as train"));
  EXPECT_THAT(CheckSplitName(std::string(300, 'a')).message(),
              HasSubstr("300 bytes, expected at most 217"));
  // The longest name accepted keeps "<split>-<10 digits>-<16 hex>.shard.tmp" within 255 bytes.
  EXPECT_EQ(kMaxSplitNameBytes + kLongestSplitFileSuffix, 255u);
  EXPECT_EQ(kLongestSplitFileSuffix,
            ShardFileName("", UINT32_MAX, UINT64_MAX).size() + std::string(".tmp").size());
  const std::string longest(kMaxSplitNameBytes, 'b');
  auto m = WriteDataset(env.get(), "/d", longest, r, Options(4, 3));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(Dataset::Open(env.get(), "/d", longest).ok());
  // The reader refuses what the writers refuse, with the same check.
  for (const char* bad : {".", ".."}) {
    auto read = Manifest::FromJson(
        absl::StrReplaceAll(m->ToJson(),
                            {{absl::StrCat("\"", longest, "\""), absl::StrCat("\"", bad, "\"")}}),
        "/m");
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(read.status().message(), HasSubstr("split: split name \"")) << bad;
  }
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
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 4), Options(3, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->shards.size(), 2u);
  const std::string test_shard =
      Dataset::Open(env.get(), "/d/test.manifest.json").value()->manifest().shards[0].file;
  EXPECT_THAT(Children(env.get(), "/d"),
              ::testing::ElementsAre(test_shard, "test.manifest.json", m->shards[0].file,
                                     m->shards[1].file, "train.manifest.json"));
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
  auto escape =
      Manifest::FromJson(absl::StrReplaceAll(text, {{m->shards[0].file, "../x.shard"}}), "/m");
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Manifest::FromJson(text.substr(0, text.size() / 2), "/m").status().code(),
            absl::StatusCode::kDataLoss);
}

// A NUL in a shard's name used to end the name opened (and the message printing it) early.
TEST(ManifestTest, ANulInAShardNameIsRefusedAndShownEscaped) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 2));
  ASSERT_TRUE(m.ok());
  auto bad = Manifest::FromJson(
      absl::StrReplaceAll(m->ToJson(), {{m->shards[0].file, "bad\\u0000name.shard"}}), "/m");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("shards[0].file: \"bad\\x00name.shard\" is not a plain file name"));
}

TEST(DatasetTest, ShardFromAnotherDatasetIsDataLoss) {
  auto env = NewMemEnv();
  auto a = WriteDataset(env.get(), "/a", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 2));
  auto b = WriteDataset(env.get(), "/b", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 4));
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string a1 = "/a/" + a->shards[1].file;
  ASSERT_TRUE(env->RenameFile("/b/" + b->shards[1].file, a1).ok());
  auto ds = Dataset::Open(env.get(), "/a");
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE((*ds)->shard(0).ok());
  absl::Status s = (*ds)->shard(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(a1 + ": header: frame_count 1"));
}

TEST(DatasetTest, VerifyNamesTheCorruptShardFrameAndOffset) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(4, 4), 9), Options(4, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string path = "/d/" + m->shards[1].file;
  std::string shard = ReadFileToString(env.get(), path).value();
  shard[70] ^= 1;
  auto f = env->NewWritableFile(path);
  ASSERT_TRUE((*f)->Append(shard).ok());
  auto ds = Dataset::Open(env.get(), "/d/train.manifest.json");
  ASSERT_TRUE(ds.ok());
  absl::Status s = VerifyDataset(**ds);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path + ": frame 0 at byte offset 64: checksum"));
}

// A manifest that is valid on its own but claims more records than its shard holds: reading
// the split must name the shard and the disagreeing count, and must not allocate (or zero-fill)
// what the manifest claims: 2^32 records of 64x64 u8 would be 16 TiB, which the memory check
// refuses with kResourceExhausted if it ran before the shards were checked.
TEST(DatasetTest, ReadAllRecordsRefusesAManifestThatOverstatesAShardsRecordCount) {
  for (const uint64_t claimed : {uint64_t{10}, uint64_t{1000}, uint64_t{1} << 32}) {
    SCOPED_TRACE(claimed);
    auto env = NewMemEnv();
    auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(64, 64), 9), Options(16, 2));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->shards.size(), 1u);
    Manifest bad = *m;
    bad.record_count = claimed;
    bad.options.records_per_shard = claimed;
    bad.shards[0].record_count = claimed;
    bad.shards[0].frame_count = static_cast<uint32_t>((claimed + 1) / 2);
    ASSERT_TRUE(WriteFileAtomically(env.get(), "/d/train.manifest.json", bad.ToJson()).ok());
    auto ds = Dataset::Open(env.get(), "/d");
    ASSERT_TRUE(ds.ok()) << ds.status();  // the manifest alone is consistent
    ASSERT_EQ((*ds)->record_count(), claimed);
    auto back = ReadAllRecords(**ds, 1);
    EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss) << back.status();
    EXPECT_THAT(back.status().message(),
                HasSubstr(absl::StrCat("/d/", m->shards[0].file,
                                       ": header: record_count 9 "
                                       "disagrees with /d/train.manifest.json (expected ",
                                       claimed, ")")));
  }
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

// ---------------------------------------------------------------------------------------------
// Rewriting a split (docs/formats/shard.md, "Atomicity and rewriting a split").

// The old split: 60 records in shards of 25. The new one: 70 records whose first 25 are the
// old ones, so its shard 0 has the same bytes (and name) as the old shard 0, and the others
// differ.
struct Rewrite {
  RecordArrays old_records = MakeRecords(U8Spec(4, 4), 60, 1);
  RecordArrays new_records;
  WriteDatasetOptions options = Options(25, 8);
  Rewrite() {
    const RecordArrays other = MakeRecords(U8Spec(4, 4), 70, 2);
    new_records = other;
    const size_t sb = other.spec.sample_bytes();
    new_records.samples.replace(0, 25 * sb, old_records.samples.substr(0, 25 * sb));
    new_records.labels.replace(0, 25, old_records.labels.substr(0, 25));
  }
};

std::map<std::string, std::string> Files(Env* env, const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const std::string& n : Children(env, dir)) {
    out[n] = ReadFileToString(env, JoinPath(dir, n)).value();
  }
  return out;
}

// The split in `dir` verifies and reads back exactly `want`.
void ExpectSplitHolds(Env* env, const std::string& dir, const RecordArrays& want,
                      const std::string& where) {
  auto ds = Dataset::Open(env, dir);
  ASSERT_TRUE(ds.ok()) << where << ": " << ds.status();
  EXPECT_TRUE(VerifyDataset(**ds).ok()) << where << ": " << VerifyDataset(**ds);
  auto back = ReadAllRecords(**ds, 1);
  ASSERT_TRUE(back.ok()) << where << ": " << back.status();
  EXPECT_EQ(back->count, want.count) << where;
  EXPECT_TRUE(back->samples == want.samples && back->labels == want.labels) << where;
}

TEST(DatasetWriterTest, ShardFileNamesAreIndexAndContentXxh3) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 9), Options(4, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->shards.size(), 3u);
  for (size_t i = 0; i < m->shards.size(); ++i) {
    EXPECT_EQ(m->shards[i].file,
              absl::StrFormat("train-%05d-%s.shard", i, ChecksumToHex(m->shards[i].xxh3)));
    EXPECT_EQ(Xxh3(ReadFileToString(env.get(), "/d/" + m->shards[i].file).value()),
              m->shards[i].xxh3);
  }
}

TEST(DatasetWriterTest, RewriteFailingAtEveryWriteOffsetLeavesTheOldSplitReadable) {
  const Rewrite w;
  // Bytes appended by a successful rewrite: the failure point sweeps all of them.
  int64_t total = 0;
  {
    auto mem = NewMemEnv();
    ASSERT_TRUE(WriteDataset(mem.get(), "/d", "train", w.old_records, w.options).ok());
    for (int64_t budget = 1;; budget *= 2) {
      auto probe = NewMemEnv();
      ASSERT_TRUE(WriteDataset(probe.get(), "/d", "train", w.old_records, w.options).ok());
      FaultInjectionEnv env(probe.get());
      env.FailWritesAfter(budget);
      if (WriteDataset(&env, "/d", "train", w.new_records, w.options).ok()) {
        total = budget;
        break;
      }
    }
  }
  int failures = 0;
  for (int64_t budget = 0; budget <= total; ++budget) {
    auto mem = NewMemEnv();
    ASSERT_TRUE(WriteDataset(mem.get(), "/d", "train", w.old_records, w.options).ok());
    const auto before = Files(mem.get(), "/d");
    FaultInjectionEnv env(mem.get());
    env.FailWritesAfter(budget);
    absl::StatusOr<Manifest> m = WriteDataset(&env, "/d", "train", w.new_records, w.options);
    const std::string where = absl::StrCat("budget ", budget);
    if (!m.ok()) {
      ++failures;
      EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted) << where;
      EXPECT_EQ(Files(mem.get(), "/d"), before) << where << ": the old split's files changed";
      ExpectSplitHolds(mem.get(), "/d", w.old_records, where);
      continue;
    }
    // Success: only the new split's shards and manifest remain.
    std::vector<std::string> want;
    for (const ShardEntry& e : m->shards) want.push_back(e.file);
    want.push_back("train.manifest.json");
    std::sort(want.begin(), want.end());
    EXPECT_EQ(Children(mem.get(), "/d"), want) << where;
    EXPECT_EQ(m->shards[0].file, Dataset::Open(mem.get(), "/d").value()->manifest().shards[0].file);
    ExpectSplitHolds(mem.get(), "/d", w.new_records, where);
  }
  EXPECT_GT(failures, 1000) << "the sweep must cover every write of the rewrite";
}

TEST(DatasetWriterTest, RewriteFailingAtEveryRenameLeavesTheOldSplitReadable) {
  const Rewrite w;
  // 3 shard renames, then the manifest's.
  for (int64_t renames = 0; renames <= 4; ++renames) {
    auto mem = NewMemEnv();
    ASSERT_TRUE(WriteDataset(mem.get(), "/d", "train", w.old_records, w.options).ok());
    const auto before = Files(mem.get(), "/d");
    FaultInjectionEnv env(mem.get());
    env.FailRenamesAfter(renames);
    absl::Status s = WriteDataset(&env, "/d", "train", w.new_records, w.options).status();
    const std::string where = absl::StrCat(renames, " renames succeed");
    if (renames < 4) {
      EXPECT_FALSE(s.ok()) << where;
      EXPECT_THAT(s.message(), HasSubstr("(injected)")) << where;
      EXPECT_EQ(Files(mem.get(), "/d"), before) << where;
      ExpectSplitHolds(mem.get(), "/d", w.old_records, where);
    } else {
      EXPECT_TRUE(s.ok()) << s;
      ExpectSplitHolds(mem.get(), "/d", w.new_records, where);
    }
  }
}

TEST(DatasetWriterTest, RewriteRemovesLeftoversOfInterruptedWritesButNotOtherSplits) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "test", MakeRecords(U8Spec(2, 2), 2), Options(3, 2)).ok());
  for (const char* stray :
       {"train-00004.shard", "train-00003.shard.tmp", "train-00009-0123456789abcdef.shard",
        "train.manifest.json.tmp", "train-extra-00000.shard", "notes.txt"}) {
    ASSERT_TRUE(WriteFileAtomically(env.get(), JoinPath("/d", stray), "x").ok());
  }
  auto m = WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(2, 2), 4), Options(3, 2));
  ASSERT_TRUE(m.ok()) << m.status();
  auto t = Dataset::Open(env.get(), "/d/test.manifest.json");
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<std::string> want = {
      m->shards[0].file,    m->shards[1].file,    (*t)->manifest().shards[0].file,
      "notes.txt",          "test.manifest.json", "train-extra-00000.shard",
      "train.manifest.json"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(Children(env.get(), "/d"), want);
}

TEST(DatasetTest, ReaderOfTheOldManifestGetsNotFoundNamingTheShardAfterARewrite) {
  const Rewrite w;
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteDataset(env.get(), "/d", "train", w.old_records, w.options).ok());
  auto old = Dataset::Open(env.get(), "/d");
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE((*old)->shard(2).ok());  // opened before the rewrite: stays readable
  ASSERT_TRUE(WriteDataset(env.get(), "/d", "train", w.new_records, w.options).ok());
  absl::Status s = (*old)->shard(1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("/d/" + (*old)->manifest().shards[1].file));
  EXPECT_THAT(s.message(), HasSubstr("/d/train.manifest.json"));
  EXPECT_TRUE((*old)->shard(2).value()->Verify().ok());
  ExpectSplitHolds(env.get(), "/d", w.new_records, "after the rewrite");
}

TEST(DatasetWriterTest, SecondWriterIsRefusedWhileTheDirectoryIsLocked) {
  const Rewrite w;
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteDataset(env.get(), "/d", "train", w.old_records, w.options).ok());
  const auto before = Files(env.get(), "/d");
  {
    auto holder = FileLock::Acquire(env.get(), "/d", "sluice-shard create (split train)");
    ASSERT_TRUE(holder.ok()) << holder.status();
    absl::Status s = WriteDataset(env.get(), "/d", "test", w.new_records, w.options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("locked by pid ", ::getpid(), " on host ")));
    auto files = Files(env.get(), "/d");
    files.erase(FileLock::kFileName);
    EXPECT_EQ(files, before);
  }
  EXPECT_TRUE(WriteDataset(env.get(), "/d", "test", w.new_records, w.options).ok());
  ExpectSplitHolds(env.get(), "/d", w.old_records, "train");
}

// Shards of another split copied under this split's names (same shape, counts and size):
// the manifest's per-shard meta_xxh3 catches it at open, before any frame is read.
TEST(DatasetShardIdentityTest, AShardOfAnotherSplitUnderThisSplitsNameIsRefusedAtOpen) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(4, 4), 40, 1), Options(20, 5))
          .ok());
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "test", MakeRecords(U8Spec(4, 4), 40, 2), Options(20, 5)).ok());
  auto train = Dataset::Open(env.get(), "/d/train.manifest.json", "train");
  auto test = Dataset::Open(env.get(), "/d/test.manifest.json", "test");
  ASSERT_TRUE(train.ok() && test.ok());
  const ShardEntry& victim = (*train)->manifest().shards[1];
  ASSERT_TRUE(victim.meta_xxh3.has_value());
  const std::string intruder =
      ReadFileToString(env.get(), "/d/" + (*test)->manifest().shards[1].file).value();
  ASSERT_EQ(intruder.size(), victim.bytes);
  ASSERT_TRUE(WriteFileAtomically(env.get(), "/d/" + victim.file, intruder).ok());

  auto reopened = Dataset::Open(env.get(), "/d/train.manifest.json", "train");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_TRUE((*reopened)->shard(0).ok());
  absl::StatusOr<const ShardReader*> swapped = (*reopened)->shard(1);
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(swapped.status().message()),
              ::testing::HasSubstr("is not the shard the manifest names"));
  EXPECT_THAT(std::string(swapped.status().message()), ::testing::HasSubstr(victim.file));
}

TEST(DatasetShardIdentityTest, AManifestWithoutMetaChecksumsStillReads) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteDataset(env.get(), "/d", "train", MakeRecords(U8Spec(4, 4), 40, 1), Options(20, 5))
          .ok());
  std::string text = ReadFileToString(env.get(), "/d/train.manifest.json").value();
  auto json = nlohmann::json::parse(text);
  for (auto& shard : json["shards"]) shard.erase("meta_xxh3");
  ASSERT_TRUE(WriteFileAtomically(env.get(), "/d/train.manifest.json", json.dump(2) + "\n").ok());
  auto ds = Dataset::Open(env.get(), "/d/train.manifest.json", "train");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_FALSE((*ds)->manifest().shards[0].meta_xxh3.has_value());
  EXPECT_TRUE((*ds)->shard(1).ok());
}

// A split of more shards than the soft `ulimit -n` used to fail half way with "Too many open
// files"; the soft limit is raised to the hard one, and a hard limit that is too small is a
// clear error at open. Each case runs in a child process, whose limits it changes.
class DatasetOpenFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_open_files_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ASSERT_TRUE(WriteDataset(Env::Default(), dir_, "train", MakeRecords(U8Spec(4, 4), kShards),
                             Options(1, 1))
                    .ok());
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  static constexpr int kShards = 150;
  std::string dir_;
};

// Opens the dataset and every shard: 0 when all opened, 1 when Open failed with a message
// naming the hard limit, 2 otherwise.
int OpenEveryShard(const std::string& dir, rlim_t soft, rlim_t hard) {
  struct rlimit lim = {soft, hard};
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 3;
  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::Open(Env::Default(), dir, "train");
  if (!ds.ok()) {
    return ds.status().code() == absl::StatusCode::kResourceExhausted &&
                   absl::StrContains(ds.status().message(), "hard 100")
               ? 1
               : 2;
  }
  for (size_t i = 0; i < (*ds)->manifest().shards.size(); ++i) {
    if (!(*ds)->shard(i).ok()) return 2;
  }
  return 0;
}

TEST_F(DatasetOpenFilesTest, MoreShardsThanTheSoftLimitRaiseIt) {
  struct rlimit lim;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < 400) {
    GTEST_SKIP() << "the hard open-file limit " << lim.rlim_max << " is below this test's 400";
  }
  EXPECT_EXIT(std::_Exit(OpenEveryShard(dir_, 100, lim.rlim_max)), ::testing::ExitedWithCode(0),
              "");
}

TEST_F(DatasetOpenFilesTest, AHardLimitBelowTheShardCountIsAClearErrorAtOpen) {
  EXPECT_EXIT(std::_Exit(OpenEveryShard(dir_, 100, 100)), ::testing::ExitedWithCode(1), "");
}

// "needs 59 open files and this process may open at most 100" read as a contradiction: the
// 64 spare and the files already open were left out. The message states the whole sum, and
// the sum adds up. Exits 0 when it does, 1 when not (the message on stderr).
int OpenFailsStatingTheSum(const std::string& dir, rlim_t limit) {
  struct rlimit lim = {limit, limit};
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) return 3;
  absl::StatusOr<std::unique_ptr<Dataset>> ds = Dataset::Open(Env::Default(), dir, "train");
  if (ds.ok()) return 2;
  const std::string message(ds.status().message());
  const size_t at = message.find(": needs ");
  unsigned long long shards = 0, spare = 0, open_now = 0, total = 0, most = 0;
  const bool parsed =
      at != std::string::npos &&
      std::sscanf(message.c_str() + at,
                  ": needs %llu shard files + %llu spare + %llu already open = %llu open "
                  "files; this process may open at most %llu (ulimit -n",
                  &shards, &spare, &open_now, &total, &most) == 5;
  if (parsed && shards == 150 && spare == 64 && open_now >= 3 &&
      total == shards + spare + open_now && most == limit) {
    return 0;
  }
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

TEST_F(DatasetOpenFilesTest, TheErrorStatesShardsPlusSparePlusOpenAgainstTheLimit) {
  // 150 shards alone fit under 200; with the spare and the files open they do not.
  EXPECT_EXIT(std::_Exit(OpenFailsStatingTheSum(dir_, 200)), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace sluice
