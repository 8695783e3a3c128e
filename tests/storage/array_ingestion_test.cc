// Array input read twice or too large to hold: one CIFAR-10 batch named twice (spellings, hard
// and symbolic links, two names of one batch number), --images and --labels naming one file,
// and frames counted from the records a split really has.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/testing/mem_env.h"
#include "storage/cifar10.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"
#include "storage/dataset_writer.h"
#include "storage/record_files.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ArrayInputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "array_input_files_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Path(const std::string& relative) { return JoinPath(dir_, relative); }
  // A CIFAR-10 batch of one record.
  void WriteBatch(const std::string& relative) {
    fs::create_directories(fs::path(Path(relative)).parent_path());
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), Path(relative),
                                    std::string(kCifar10RecordBytes, '\x01'))
                    .ok());
  }

  std::string dir_;
};

TEST_F(ArrayInputFilesTest, OneCifarBatchListedTwiceInTwoSpellingsIsRefusedNamingBoth) {
  WriteBatch("data_batch_1.bin");
  const std::string a = Path("data_batch_1.bin"), b = dir_ + "/./data_batch_1.bin";
  auto files = Cifar10Files(Env::Default(), absl::StrCat(a, ",", b), "train");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(),
              HasSubstr(absl::StrCat(a, " and ", b, " are the same file (one device and inode")));
  EXPECT_THAT(files.status().message(), HasSubstr("remove one of them"));
}

TEST_F(ArrayInputFilesTest, ACifarDirectoryWithLinkedBatchesIsRefused) {
  WriteBatch("d/data_batch_1.bin");
  fs::create_symlink("data_batch_1.bin", Path("d/data_batch_2.bin"));
  fs::create_hard_link(Path("d/data_batch_1.bin"), Path("d/data_batch_3.bin"));
  auto files = Cifar10Files(Env::Default(), Path("d"), "train");
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(files.status().message(),
              HasSubstr(absl::StrCat(Path("d/data_batch_1.bin"), " and ",
                                     Path("d/data_batch_2.bin"), " are the same file")));
  EXPECT_THAT(files.status().message(), HasSubstr("(2 entries in all repeat an earlier one)"));
}

TEST_F(ArrayInputFilesTest, TwoCifarFilesOfOneBatchNumberAreRefusedNamingBoth) {
  WriteBatch("d/data_batch_01.bin");
  WriteBatch("d/data_batch_1.bin");
  WriteBatch("d/data_batch_2.bin");
  auto files = Cifar10Files(Env::Default(), Path("d"), "train");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr(" are both batch 1"));
  EXPECT_THAT(files.status().message(), HasSubstr(Path("d/data_batch_01.bin")));
  EXPECT_THAT(files.status().message(), HasSubstr(Path("d/data_batch_1.bin")));
}

// data_batch_99999999999999999999.bin was left out without a word, and data_batch_-1.bin and
// data_batch_+3.bin were read as batches -1 and 3: a data_batch_*.bin that is not one of the
// five CIFAR-10 ships is refused, naming it.
TEST_F(ArrayInputFilesTest, ACifarBatchNameOutsideOneToFiveIsRefusedNamingTheFile) {
  for (const char* name : {"data_batch_99999999999999999999.bin", "data_batch_-1.bin",
                           "data_batch_+3.bin", "data_batch_6.bin", "data_batch_0.bin",
                           "data_batch_ 2.bin", "data_batch_.bin", "data_batch_x.bin"}) {
    fs::remove_all(Path("d"));
    WriteBatch("d/data_batch_1.bin");
    WriteBatch(absl::StrCat("d/", name));
    auto files = Cifar10Files(Env::Default(), Path("d"), "train");
    ASSERT_FALSE(files.ok()) << name;
    EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(files.status().message(),
                HasSubstr(absl::StrCat(Path(absl::StrCat("d/", name)),
                                       ": not a CIFAR-10 batch name (expected data_batch_1.bin "
                                       "... data_batch_5.bin")));
  }
  // The test split reads test_batch.bin alone: other names are not its concern.
  WriteBatch("d/test_batch.bin");
  EXPECT_TRUE(Cifar10Files(Env::Default(), Path("d"), "test").ok());
}

TEST_F(ArrayInputFilesTest, DistinctCifarBatchesAreAllRead) {
  WriteBatch("d/data_batch_1.bin");
  WriteBatch("d/data_batch_2.bin");
  auto in = ReadCifar10Files(Env::Default(), Path("d"), "train");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->records.count, 2u);
}

TEST_F(ArrayInputFilesTest, ImagesAndLabelsNamingOneFileAreRefusedBeforeReading) {
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), Path("x.npy"), "\x93NUMPY").ok());
  fs::create_symlink("x.npy", Path("y.npy"));
  absl::Status s =
      ReadImageLabelFiles(Env::Default(), Path("x.npy"), Path("y.npy"), std::nullopt).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("images ", Path("x.npy"), " and labels ",
                                                  Path("y.npy"), " are the same file")));
}

// Records of HxWx1 u8 whose samples are all `value`, read on demand (nothing held).
RecordSource ConstantRecords(uint32_t height, uint32_t width, uint64_t count, char value) {
  RecordSource r;
  r.spec = RecordSpec{.height = height, .width = width, .channels = 1};
  r.count = count;
  r.labels.assign(count, '\0');
  const size_t sample = r.spec.sample_bytes();
  r.read_samples = [sample, value](uint64_t, uint32_t n, char* out) {
    std::memset(out, value, n * sample);
  };
  return r;
}

TEST(FrameLimitTest, TwoRecordsOf20MBAreWrittenWithTheDefault256PerFrameAndReadBack) {
  // Refused as "256 records of 20000001 bytes per frame exceed the 4 GiB frame limit".
  auto env = NewMemEnv();
  const RecordSource r = ConstantRecords(5000, 4000, 2, 7);
  WriteDatasetOptions o;  // records_per_frame 256
  auto m = WriteDataset(env.get(), "/d", "train", r, o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->options.records_per_frame, 2u);  // what a frame holds, so readers accept it
  auto ds = Dataset::Open(env.get(), "/d");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE(VerifyDataset(**ds).ok());
  auto back = ReadAllRecords(**ds, 1);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->count, 2u);
  EXPECT_EQ(back->samples, std::string(2 * 5000 * 4000, '\x07'));
}

TEST(FrameLimitTest, SmallSplitsKeepTheirRecordsPerFrame) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), "/d", "train", ConstantRecords(2, 2, 3, 1), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->options.records_per_frame, 256u);  // output bytes unchanged
}

TEST(FrameLimitTest, AFrameOverTheLimitNamesTheRecordsItHoldsAndTheCallersArgument) {
  auto env = NewMemEnv();
  WriteDatasetOptions o;
  o.names.records_per_frame = "records_per_frame";
  absl::Status s =
      WriteDataset(env.get(), "/d", "train", ConstantRecords(40000, 40000, 3, 0), o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("3 records of 1600000001 bytes per frame exceed the 4 GiB frame limit; "
                        "lower records_per_frame (at most 2 records of this size)"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("--records-per-frame")));
}

TEST(FrameLimitTest, ARecordOverTheFrameLimitIsRefusedAsUnstorable) {
  auto env = NewMemEnv();
  absl::Status s =
      WriteDataset(env.get(), "/d", "train", ConstantRecords(70000, 70000, 2, 0), {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("one record of 4900000001 bytes (70000x70000x1 samples) "
                                     "exceeds the 4 GiB frame limit"));
}

}  // namespace
}  // namespace sluice
