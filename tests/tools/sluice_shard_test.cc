// Runs the sluice-shard binary: exit codes and the one-line errors users see.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/env.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"
#include "storage/idx.h"
#include "storage/shard_reader.h"
#include "tests/storage/test_records.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Result = testing::ToolOutput;

// `shell_prefix` runs first in the same shell (e.g. "ulimit -n 40 && ").
Result RunShard(const std::string& args, const std::string& shell_prefix = "") {
  return testing::RunShell(absl::StrCat(shell_prefix, SLUICE_SHARD_BIN, " ", args));
}

// A .npy file (format 1.0) of `descr` and `shape` holding `data`.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

// `n` samples of (c, h, w) bytes, and the same samples as (h, w, c).
struct ChwSamples {
  std::string chw, hwc;
};
ChwSamples MakeChw(size_t n, size_t c, size_t h, size_t w) {
  ChwSamples s{std::string(n * c * h * w, '\0'), std::string(n * c * h * w, '\0')};
  for (size_t i = 0; i < s.chw.size(); ++i) s.chw[i] = static_cast<char>((i * 37 + 11) % 256);
  for (size_t i = 0; i < n; ++i)
    for (size_t ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < h * w; ++p)
        s.hwc[(i * h * w + p) * c + ch] = s.chw[(i * c + ch) * h * w + p];
  return s;
}

class SluiceShardCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "sluice_shard_cli_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(std::system(("rm -rf " + dir_).c_str()), 0);
    ASSERT_TRUE(env_->CreateDirs(dir_).ok());
    records_ = testing::MakeRecords(testing::U8Spec(6, 5), 50);
    auto paths = WriteIdxPair(env_, dir_ + "/in", records_);
    ASSERT_TRUE(paths.ok()) << paths.status();
    images_ = paths->images;
    labels_ = paths->labels;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string CreateArgs() const {
    return absl::StrCat("create --images ", images_, " --labels ", labels_, " --out ", dir_,
                        "/ds --records-per-shard 20 --records-per-frame 8 --quiet");
  }

  // Path of shard `i` of the split in DIR/ds, as its manifest names it.
  std::string ShardPath(size_t i) const {
    auto ds = Dataset::Open(env_, dir_ + "/ds");
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? dir_ + "/ds/" + (*ds)->manifest().shards.at(i).file : "";
  }

  Env* env_ = Env::Default();
  std::string dir_, images_, labels_;
  RecordArrays records_;
};

TEST_F(SluiceShardCliTest, CreateVerifyExportRoundTripIsByteIdentical) {
  Result c = RunShard(CreateArgs());
  ASSERT_EQ(c.exit_code, 0) << c.text;
  EXPECT_THAT(c.text, HasSubstr("50 records in 3 shards"));
  Result v = RunShard("verify " + dir_ + "/ds");
  EXPECT_EQ(v.exit_code, 0) << v.text;
  EXPECT_THAT(v.text, HasSubstr("OK " + dir_ + "/ds/train.manifest.json"));
  Result e = RunShard(absl::StrCat("export ", dir_, "/ds --out ", dir_, "/out/train"));
  ASSERT_EQ(e.exit_code, 0) << e.text;
  EXPECT_EQ(ReadFileToString(env_, dir_ + "/out/train-images-idx3-ubyte").value(),
            ReadFileToString(env_, images_).value());
  EXPECT_EQ(ReadFileToString(env_, dir_ + "/out/train-labels-idx1-ubyte").value(),
            ReadFileToString(env_, labels_).value());
}

// export --split test of a folder whose only split is train wrote the train split, exit 0,
// as if it were the test split (and so did a train manifest with --split test). A split named
// is that split or an error naming it and the splits there; without --split, a folder's only
// split is still exported.
TEST_F(SluiceShardCliTest, ExportOfASplitTheDatasetDoesNotHoldIsAnErrorListingItsSplits) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  for (const char* split : {"test", "val"}) {
    Result e =
        RunShard(absl::StrCat("export ", dir_, "/ds --out ", dir_, "/out/x --split ", split));
    EXPECT_EQ(e.exit_code, 1) << e.text;
    EXPECT_THAT(e.text,
                HasSubstr(absl::StrCat(dir_, "/ds: no split \"", split, "\" (expected ", dir_,
                                       "/ds/", split, ".manifest.json); the splits there: train")));
    EXPECT_FALSE(env_->FileExists(dir_ + "/out/x-images-idx3-ubyte"));
  }
  Result e = RunShard(
      absl::StrCat("export ", dir_, "/ds/train.manifest.json --out ", dir_, "/out/x --split test"));
  EXPECT_EQ(e.exit_code, 1) << e.text;
  EXPECT_THAT(e.text, HasSubstr(absl::StrCat(dir_,
                                             "/ds/train.manifest.json is split \"train\", "
                                             "not --split test")));
  EXPECT_FALSE(env_->FileExists(dir_ + "/out/x-images-idx3-ubyte"));
  // Named as it is, or not named: exported.
  EXPECT_EQ(
      RunShard(absl::StrCat("export ", dir_, "/ds --out ", dir_, "/out/t --split train")).exit_code,
      0);
  EXPECT_EQ(RunShard(absl::StrCat("export ", dir_, "/ds/train.manifest.json --out ", dir_,
                                  "/out/m --split train"))
                .exit_code,
            0);
  ASSERT_EQ(RunShard(absl::StrCat("create --images ", images_, " --labels ", labels_, " --out ",
                                  dir_, "/only_test --split test --quiet"))
                .exit_code,
            0);
  e = RunShard(absl::StrCat("export ", dir_, "/only_test --out ", dir_, "/out/only"));
  EXPECT_EQ(e.exit_code, 0) << e.text;
  e = RunShard(absl::StrCat("export ", dir_, "/only_test --out ", dir_, "/out/foo --split foo"));
  EXPECT_EQ(e.exit_code, 1) << e.text;
  EXPECT_THAT(e.text, HasSubstr("the splits there: test"));
}

TEST_F(SluiceShardCliTest, ThreadCountDoesNotChangeTheOutput) {
  ASSERT_EQ(RunShard(CreateArgs() + " --threads 1").exit_code, 0);
  ASSERT_EQ(std::system(absl::StrCat("mv ", dir_, "/ds ", dir_, "/ds1").c_str()), 0);
  ASSERT_EQ(RunShard(CreateArgs() + " --threads 2").exit_code, 0);
  EXPECT_EQ(std::system(absl::StrCat("diff -r ", dir_, "/ds ", dir_, "/ds1").c_str()), 0);
}

TEST_F(SluiceShardCliTest, VerifyNamesFirstBadFileFrameAndOffset) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  const std::string shard = ShardPath(1);
  auto reader = ShardReader::Open(env_, shard);
  ASSERT_TRUE(reader.ok());
  const uint64_t off = (*reader)->frames()[1].offset;
  std::string bytes = ReadFileToString(env_, shard).value();
  bytes[off + 3] ^= 0x20;
  ASSERT_TRUE(WriteFileAtomically(env_, shard, bytes).ok());
  Result v = RunShard("verify " + dir_ + "/ds");
  EXPECT_EQ(v.exit_code, 1) << v.text;
  EXPECT_THAT(v.text, HasSubstr(absl::StrCat("sluice-shard verify: error: ", shard,
                                             ": frame 1 at byte offset ", off, ": checksum")));
}

TEST_F(SluiceShardCliTest, InspectShowsLayoutRatioAndHistogram) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  Result m = RunShard("inspect " + dir_ + "/ds");
  EXPECT_EQ(m.exit_code, 0) << m.text;
  EXPECT_THAT(m.text, HasSubstr(BaseName(ShardPath(2))));
  EXPECT_THAT(m.text, HasSubstr("compression:"));
  EXPECT_THAT(m.text, HasSubstr("label histogram"));
  EXPECT_THAT(m.text, HasSubstr("sample u8 1x6x5 (C x H x W, stored HWC; 30 bytes), label u8, "
                                "10 classes"));
  Result s = RunShard("inspect " + ShardPath(0));
  EXPECT_EQ(s.exit_code, 0) << s.text;
  EXPECT_THAT(s.text, HasSubstr("sample u8 1x6x5 (C x H x W, stored HWC; 30 bytes), label u8"));
  EXPECT_THAT(s.text, HasSubstr("index at"));
}

// verify and inspect hold one shard open at a time: 50 shards under `ulimit -n 40` (soft and
// hard) used to fail ("needs 50 open files"; before that, "Too many open files").
TEST_F(SluiceShardCliTest, VerifyAndInspectWorkWithMoreShardsThanTheOpenFileLimit) {
  ASSERT_EQ(RunShard(absl::StrCat("create --images ", images_, " --labels ", labels_, " --out ",
                                  dir_, "/ds --records-per-shard 1 --records-per-frame 1 --quiet"))
                .exit_code,
            0);
  Result v = RunShard("verify " + dir_ + "/ds", "ulimit -n 40 && ");
  EXPECT_EQ(v.exit_code, 0) << v.text;
  EXPECT_THAT(v.text, HasSubstr("50 records in 50 shards, every checksum and count verified"));
  Result i = RunShard("inspect " + dir_ + "/ds", "ulimit -n 40 && ");
  EXPECT_EQ(i.exit_code, 0) << i.text;
  EXPECT_THAT(i.text, HasSubstr("label histogram"));
}

TEST_F(SluiceShardCliTest, InspectOfDirectoryShowsEverySplit) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  ASSERT_EQ(RunShard(CreateArgs() + " --split test").exit_code, 0);
  Result m = RunShard("inspect " + dir_ + "/ds");
  EXPECT_EQ(m.exit_code, 0) << m.text;
  EXPECT_THAT(m.text, HasSubstr("split test, 50 records"));
  EXPECT_THAT(m.text, HasSubstr("split train, 50 records"));
}

// A manifest may declare any shape; export must say it does not fit instead of aborting in
// the allocation (bad_alloc / length_error).
TEST_F(SluiceShardCliTest, ExportOfManifestDeclaringHugeImagesIsDataErrorNotAbort) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  const std::string manifest = dir_ + "/ds/train.manifest.json";
  std::string text = ReadFileToString(env_, manifest).value();
  for (const char* field : {"\"height\": 6", "\"width\": 5"}) {
    const size_t at = text.find(field);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, std::strlen(field),
                 std::string(field).substr(0, std::strlen(field) - 1) + "65536");
  }
  ASSERT_TRUE(WriteFileAtomically(env_, manifest, text).ok());
  Result e = RunShard(absl::StrCat("export ", dir_, "/ds --out ", dir_, "/out/train"));
  // One clear line and exit 1, never an abort: the shards are checked against the manifest
  // before anything is allocated (ReadAllRecords), so the shape disagreement is what it names.
  EXPECT_EQ(e.exit_code, 1) << e.text;
  EXPECT_THAT(e.text, HasSubstr("sluice-shard export: error: "));
  EXPECT_THAT(e.text, HasSubstr("record shape/dtypes disagree with " + manifest));
}

TEST_F(SluiceShardCliTest, ThreadsAboveFourTimesHardwareThreadsIsUsageError) {
  Result r = RunShard(CreateArgs() + " --threads 10000");
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--threads \"10000\": expected an integer in [0, "));
}

TEST_F(SluiceShardCliTest, MissingRequiredFlagIsUsageError) {
  Result r = RunShard("create --images " + images_ + " --out " + dir_ + "/ds");
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("create: --labels is required"));
}

TEST_F(SluiceShardCliTest, UnknownCommandOrFlagIsUsageError) {
  EXPECT_EQ(RunShard("frobnicate").exit_code, 2);
  EXPECT_EQ(RunShard("").exit_code, 2);
  Result r = RunShard(CreateArgs() + " --level 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.text, HasSubstr("unknown flag --level"));
  EXPECT_EQ(RunShard("verify").exit_code, 2);
}

TEST_F(SluiceShardCliTest, BadFlagValueIsUsageError) {
  Result r = RunShard(CreateArgs() + " --records-per-frame 0");
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--records-per-frame \"0\": expected an integer in [1,"));
  EXPECT_EQ(RunShard(CreateArgs() + " --zstd-level fast").exit_code, 2);
  EXPECT_FALSE(env_->FileExists(dir_ + "/ds/train.manifest.json"));
}

TEST_F(SluiceShardCliTest, MissingInputFileIsDataErrorNamingIt) {
  Result r = RunShard(absl::StrCat("create --images ", dir_, "/nope.gz --labels ", labels_,
                                   " --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(dir_ + "/nope.gz: open failed: No such file"));
}

TEST_F(SluiceShardCliTest, LabelsGivenAsImagesIsDataErrorNamingTheMagic) {
  // A copy: the labels file itself as both is refused as one file named twice.
  const std::string copy = dir_ + "/labels-copy";
  ASSERT_TRUE(WriteFileAtomically(env_, copy, ReadFileToString(env_, labels_).value()).ok());
  Result r = RunShard(
      absl::StrCat("create --images ", copy, " --labels ", labels_, " --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(copy + ": magic is 0x00000801, IDX images with 1 dimension"));
  EXPECT_FALSE(env_->FileExists(dir_ + "/ds/train.manifest.json"));
}

TEST_F(SluiceShardCliTest, OneFileAsImagesAndLabelsIsRefusedNamingBoth) {
  Result r = RunShard(
      absl::StrCat("create --images ", labels_, " --labels ", labels_, " --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat("images ", labels_, " and labels ", labels_,
                                             " are the same file")));
  EXPECT_FALSE(env_->FileExists(dir_ + "/ds/train.manifest.json"));
}

TEST_F(SluiceShardCliTest, NpyNchwIsStoredHwcAndWithoutLayoutIsRefused) {
  const ChwSamples x = MakeChw(6, 3, 4, 5);
  const std::string labels("\x00\x01\x02\x00\x01\x02", 6);
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/x.npy", Npy("|u1", "(6, 3, 4, 5)", x.chw)).ok());
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/y.npy", Npy("|u1", "(6,)", labels)).ok());
  const std::string args = absl::StrCat("create --images ", dir_, "/x.npy --labels ", dir_,
                                        "/y.npy --out ", dir_, "/ds --quiet");
  Result refused = RunShard(args);
  EXPECT_EQ(refused.exit_code, 1) << refused.text;
  EXPECT_THAT(refused.text, HasSubstr(dir_ + "/x.npy: shape [6, 3, 4, 5] is ambiguous"));
  EXPECT_THAT(refused.text, HasSubstr("--layout NCHW"));
  Result c = RunShard(args + " --layout NCHW");
  ASSERT_EQ(c.exit_code, 0) << c.text;
  auto ds = Dataset::Open(env_, dir_ + "/ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().num_classes, 3u);
  RecordArrays back = ReadAllRecords(**ds).value();
  EXPECT_EQ(back.spec.channels, 3u);
  EXPECT_EQ(back.spec.height, 4u);
  EXPECT_EQ(back.samples, x.hwc);
  EXPECT_EQ(back.labels, labels);
  Result inspect = RunShard("inspect " + dir_ + "/ds");
  EXPECT_THAT(inspect.text, HasSubstr("sample u8 3x4x5 (C x H x W, stored HWC; 60 bytes), "
                                      "label u8, 3 classes"));
}

TEST_F(SluiceShardCliTest, NpyImagesWithIdxLabelsNamesBothFormats) {
  ASSERT_TRUE(
      WriteFileAtomically(env_, dir_ + "/x.npy", Npy("|u1", "(50, 6, 5)", records_.samples)).ok());
  Result r = RunShard(
      absl::StrCat("create --images ", dir_, "/x.npy --labels ", labels_, " --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(dir_ + "/x.npy is a NumPy .npy file but " + labels_ + " is not"));
}

TEST_F(SluiceShardCliTest, Cifar10BatchesComeBackAsTheSourceImagesHwc) {
  const ChwSamples x = MakeChw(5, 3, 32, 32);
  std::string batch1, batch2;
  for (size_t i = 0; i < 5; ++i) {
    std::string& b = i < 3 ? batch1 : batch2;
    b += static_cast<char>(i * 2);
    b += x.chw.substr(i * 3072, 3072);
  }
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/cifar").ok());
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/cifar/data_batch_1.bin", batch1).ok());
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/cifar/data_batch_2.bin", batch2).ok());
  Result c =
      RunShard(absl::StrCat("create --cifar10 ", dir_, "/cifar --out ", dir_, "/ds --quiet"));
  ASSERT_EQ(c.exit_code, 0) << c.text;
  auto ds = Dataset::Open(env_, dir_ + "/ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().num_classes, 10u);
  RecordArrays back = ReadAllRecords(**ds).value();
  EXPECT_EQ(back.samples, x.hwc);
  EXPECT_EQ(back.labels, std::string("\x00\x02\x04\x06\x08", 5));
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/cifar/data_batch_3.bin", batch1.substr(1)).ok());
  Result bad = RunShard(absl::StrCat("create --cifar10 ", dir_, "/cifar --out ", dir_, "/ds2"));
  EXPECT_EQ(bad.exit_code, 1) << bad.text;
  EXPECT_THAT(bad.text, HasSubstr(dir_ + "/cifar/data_batch_3.bin: 9218 bytes, not a positive "
                                         "multiple of 3073"));
}

TEST_F(SluiceShardCliTest, LabelAtNumClassesIsRefusedNamingTheRecordAndNothingIsWritten) {
  size_t first = 0;
  while (static_cast<uint8_t>(records_.labels[first]) < 5) ++first;
  Result r = RunShard(CreateArgs() + " --num-classes 5");
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat("label of record ", first, " is ",
                                             static_cast<int>(records_.labels[first]),
                                             ": expected a class index in [0, 5)")));
  EXPECT_FALSE(env_->FileExists(dir_ + "/ds/train.manifest.json"));
  ASSERT_EQ(RunShard(CreateArgs() + " --num-classes 12").exit_code, 0);
  EXPECT_EQ(Dataset::Open(env_, dir_ + "/ds").value()->manifest().num_classes, 12u);
}

TEST_F(SluiceShardCliTest, CountsThatDisagreeAreDataError) {
  RecordArrays fewer = records_;
  fewer.count = 49;
  fewer.labels.pop_back();
  auto p = WriteIdxPair(env_, dir_ + "/few", fewer);
  ASSERT_TRUE(p.ok());
  Result r = RunShard(
      absl::StrCat("create --images ", images_, " --labels ", p->labels, " --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("49 labels, expected 50"));
}

TEST_F(SluiceShardCliTest, UnwritableOutputIsDataError) {
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/file", "x").ok());
  Result r = RunShard(absl::StrCat("create --images ", images_, " --labels ", labels_, " --out ",
                                   dir_, "/file/ds --quiet"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(dir_ + "/file"));
}

TEST_F(SluiceShardCliTest, VerifyOfDirectoryWithoutManifestIsDataError) {
  ASSERT_TRUE(env_->CreateDirs(dir_ + "/half").ok());
  Result r = RunShard("verify " + dir_ + "/half");
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("no *.manifest.json"));
  EXPECT_THAT(r.text, Not(HasSubstr("usage")));
}

// Two creates into one directory at once: the second is refused by the directory lock (exit 1,
// naming the holder's pid and host) instead of interleaving with the first; the split that
// remains verifies. Runs that did not overlap in time both succeed, so this tries until one
// pair overlapped.
TEST_F(SluiceShardCliTest, ExportOfShardWhoseWholeFileXxh3DisagreesWithManifestFails) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  // The shard's frames stay intact; only the manifest's whole-file xxh3 disagrees, which only
  // `verify`'s check catches.
  const std::string shard = ShardPath(1);
  const std::string manifest = dir_ + "/ds/train.manifest.json";
  std::string text = ReadFileToString(env_, manifest).value();
  // Change the manifest's xxh3 of shard 1 (the file name carries it too; keep the name).
  auto ds = Dataset::Open(env_, dir_ + "/ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  const std::string hex = ChecksumToHex((*ds)->manifest().shards.at(1).xxh3);
  const size_t at = text.find("\"" + hex + "\"");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 1] = text[at + 1] == '0' ? '1' : '0';
  ASSERT_TRUE(WriteFileAtomically(env_, manifest, text).ok());
  Result v = RunShard("verify " + dir_ + "/ds");
  ASSERT_EQ(v.exit_code, 1) << v.text;
  Result e = RunShard(absl::StrCat("export ", dir_, "/ds --out ", dir_, "/out/train"));
  EXPECT_EQ(e.exit_code, 1) << e.text;
  EXPECT_THAT(e.text, HasSubstr("sluice-shard export: error: " + shard + ": whole-file xxh3 "));
  EXPECT_FALSE(env_->FileExists(dir_ + "/out/train-images-idx3-ubyte"));
  EXPECT_FALSE(env_->FileExists(dir_ + "/out/train-labels-idx1-ubyte"));
}

// A guard, not a regression test: frame checksums were already checked on export.
TEST_F(SluiceShardCliTest, ExportOfCorruptFrameFailsNamingTheShardAndWritesNothing) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  const std::string shard = ShardPath(2);
  auto reader = ShardReader::Open(env_, shard);
  ASSERT_TRUE(reader.ok());
  const uint64_t off = (*reader)->frames()[0].offset;
  std::string bytes = ReadFileToString(env_, shard).value();
  bytes[off + 3] ^= 0x20;
  ASSERT_TRUE(WriteFileAtomically(env_, shard, bytes).ok());
  Result e = RunShard(absl::StrCat("export ", dir_, "/ds --out ", dir_, "/out/train"));
  EXPECT_EQ(e.exit_code, 1) << e.text;
  EXPECT_THAT(e.text, HasSubstr("sluice-shard export: error: " + shard));
  EXPECT_FALSE(env_->FileExists(dir_ + "/out/train-images-idx3-ubyte"));
  EXPECT_FALSE(env_->FileExists(dir_ + "/out/train-labels-idx1-ubyte"));
}

TEST_F(SluiceShardCliTest, VerifyWarnsAboutFilesInNoManifestAndTmpLeftovers) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/ds/notes.txt", "hello").ok());
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/ds/train-00007.shard.tmp", "partial").ok());
  ASSERT_TRUE(WriteFileAtomically(env_, dir_ + "/ds/.sluice.lock", "").ok());
  Result v = RunShard("verify " + dir_ + "/ds");
  EXPECT_EQ(v.exit_code, 0) << v.text;
  EXPECT_THAT(v.text, HasSubstr("OK " + dir_ + "/ds/train.manifest.json"));
  EXPECT_THAT(v.text, HasSubstr("sluice-shard verify: warning: " + dir_ +
                                "/ds/notes.txt: unexpected file, in no split's manifest"));
  EXPECT_THAT(v.text, HasSubstr("sluice-shard verify: warning: " + dir_ +
                                "/ds/train-00007.shard.tmp: leftover of an interrupted write"));
  EXPECT_THAT(v.text, Not(HasSubstr(".sluice.lock")));
}

// A shard of a known split that its manifest does not list is what a rewrite that crashed
// before its manifest switch leaves behind: the split is still valid, so verify warns (naming
// the split and its manifest) and exits 0.
TEST_F(SluiceShardCliTest, VerifyWarnsAboutShardOfKnownSplitThatNoManifestLists) {
  ASSERT_EQ(RunShard(CreateArgs()).exit_code, 0);
  const std::string stray = dir_ + "/ds/train-00009-0123456789abcdef.shard";
  ASSERT_EQ(std::system(("cp " + ShardPath(0) + " " + stray).c_str()), 0);
  Result v = RunShard("verify " + dir_ + "/ds");
  EXPECT_EQ(v.exit_code, 0) << v.text;
  EXPECT_THAT(v.text, HasSubstr("sluice-shard verify: warning: " + stray +
                                ": looks like a shard of split \"train\" but " + dir_ +
                                "/ds/train.manifest.json does not list it"));
}

TEST_F(SluiceShardCliTest, ConcurrentCreatesIntoOneDirectoryOneRefusedByTheLock) {
  // Enough records that compressing them outlasts the other process's start.
  const RecordArrays big = testing::MakeRecords(testing::U8Spec(28, 28), 20000);
  auto paths = WriteIdxPair(env_, dir_ + "/big", big);
  ASSERT_TRUE(paths.ok()) << paths.status();
  const std::string args =
      absl::StrCat("create --images ", paths->images, " --labels ", paths->labels, " --out ", dir_,
                   "/ds --records-per-shard 2000 --zstd-level 12 "
                   "--threads 1 --quiet");
  bool overlapped = false;
  for (int attempt = 0; attempt < 5 && !overlapped; ++attempt) {
    const std::string cmd =
        absl::StrCat("(", SLUICE_SHARD_BIN, " ", args, " > ", dir_, "/a.out 2>&1; echo $? > ", dir_,
                     "/a.rc) & (", SLUICE_SHARD_BIN, " ", args, " > ", dir_,
                     "/b.out 2>&1; echo $? > ", dir_, "/b.rc) & wait");
    ASSERT_EQ(std::system(("bash -c '" + cmd + "'").c_str()), 0);
    const std::string a_rc = ReadFileToString(env_, dir_ + "/a.rc").value();
    const std::string b_rc = ReadFileToString(env_, dir_ + "/b.rc").value();
    const std::string a_out = ReadFileToString(env_, dir_ + "/a.out").value();
    const std::string b_out = ReadFileToString(env_, dir_ + "/b.out").value();
    ASSERT_TRUE(a_rc == "0\n" || b_rc == "0\n") << "both failed:\n" << a_out << b_out;
    if (a_rc != "0\n" || b_rc != "0\n") {
      overlapped = true;
      const std::string& loser = a_rc != "0\n" ? a_out : b_out;
      EXPECT_EQ(a_rc != "0\n" ? a_rc : b_rc, "1\n") << loser;
      EXPECT_THAT(loser, HasSubstr("sluice-shard create: error: " + dir_ +
                                   "/ds/.sluice.lock: cannot start writing split \"train\": "
                                   "the directory is locked by "));
      // Started together, the loser can meet the lock before its holder has written who it
      // is (common/file_lock: "another process, which has not written its pid and host yet").
      if (loser.find("has not written its pid") == std::string::npos) {
        EXPECT_THAT(loser, HasSubstr("locked by pid "));
        EXPECT_THAT(loser, HasSubstr(" on host "));
      }
    }
    Result v = RunShard("verify " + dir_ + "/ds");
    EXPECT_EQ(v.exit_code, 0) << v.text;
    EXPECT_FALSE(env_->FileExists(dir_ + "/ds/.sluice.lock")) << "released at exit";
  }
  EXPECT_TRUE(overlapped) << "no attempt ran the two creates at the same time";
}

}  // namespace
}  // namespace sluice
