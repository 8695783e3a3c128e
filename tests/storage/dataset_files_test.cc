// An output never replaces a file of the dataset being read: a manifest of any split, a shard
// or the lock in the dataset's directory, however its path is spelled, nor such a file under
// another name (a hard link, a symbolic link).
#include "storage/dataset_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

class DatasetFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_dataset_files_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ds_ = dir_ + "/ds";
    ASSERT_TRUE(Env::Default()->CreateDirs(ds_).ok());
    for (const char* name : {"train.manifest.json", "test.manifest.json",
                             "train-00000-0123456789abcdef.shard", ".sluice.lock"}) {
      ASSERT_TRUE(WriteFileAtomically(Env::Default(), ds_ + "/" + name, "x").ok());
    }
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  std::string dir_, ds_;
};

TEST_F(DatasetFilesTest, AManifestOfAnySplitAShardOrTheLockInTheDatasetDirectoryIsRefused) {
  const std::string manifest = ds_ + "/train.manifest.json";
  for (const std::string& data : {ds_, manifest}) {
    for (const std::string& out :
         {manifest, ds_ + "/./../ds/test.manifest.json", ds_ + "/.sluice.lock",
          ds_ + "/train-00000-0123456789abcdef.shard", ds_ + "/new-split.manifest.json"}) {
      const absl::Status s = CheckNotADatasetFile(out, data, "report_html: path");
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << out;
      EXPECT_THAT(std::string(s.message()),
                  HasSubstr(absl::StrCat("report_html: path ", out, " is a file of the dataset in ",
                                         ds_, ": it would replace it")));
    }
    EXPECT_TRUE(CheckNotADatasetFile(ds_ + "/report.html", data, "w").ok());
    EXPECT_TRUE(CheckNotADatasetFile(dir_ + "/train.manifest.json", data, "w").ok());
  }
  // A linked directory is the same directory.
  ASSERT_EQ(::symlink(ds_.c_str(), (dir_ + "/alias").c_str()), 0);
  EXPECT_FALSE(CheckNotADatasetFile(dir_ + "/alias/train.manifest.json", ds_, "w").ok());
}

// The files of an image list or folder are checked as one input is: by name in the dataset's
// directory (any spelling), and by identity (a hard or symbolic link to a dataset file).
TEST_F(DatasetFilesTest, FirstDatasetFileFindsAListedShardOrALinkToOneAndNothingElse) {
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/a.jpg", "a").ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), ds_ + "/photo.jpg", "p").ok());
  ASSERT_EQ(::symlink((ds_ + "/train-00000-0123456789abcdef.shard").c_str(),
                      (dir_ + "/link.jpg").c_str()),
            0);
  const std::string a = dir_ + "/a.jpg", photo = ds_ + "/photo.jpg";
  EXPECT_EQ(FirstDatasetFile({a, photo}, ds_), 2u);
  EXPECT_EQ(FirstDatasetFile({a, ds_ + "/../ds/train-00007-0123456789abcdef.shard"}, ds_), 1u);
  EXPECT_EQ(FirstDatasetFile({a, photo, dir_ + "/link.jpg"}, ds_), 2u);
  EXPECT_EQ(FirstDatasetFile({ds_ + "/test.manifest.json.tmp", a}, ds_), 0u);
  // No dataset directory: nothing is one of its files.
  EXPECT_EQ(FirstDatasetFile({dir_ + "/link.jpg"}, dir_ + "/missing"), 1u);
}

TEST_F(DatasetFilesTest, AHardOrSymbolicLinkToADatasetFileIsRefusedUnderAnyName) {
  ASSERT_EQ(::link((ds_ + "/train.manifest.json").c_str(), (dir_ + "/hard.html").c_str()), 0);
  absl::Status s = CheckNotADatasetFile(dir_ + "/hard.html", ds_, "--report-json");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(another name of train.manifest.json)"));
  ASSERT_EQ(::symlink((ds_ + "/train-00000-0123456789abcdef.shard").c_str(),
                      (ds_ + "/report.html").c_str()),
            0);
  s = CheckNotADatasetFile(ds_ + "/report.html", ds_ + "/train.manifest.json", "--report-html");
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("(another name of train-00000-0123456789abcdef.shard)"));
  // A file of its own, beside the data, is fine; so is any output when the dataset is missing.
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/own.html", "x").ok());
  EXPECT_TRUE(CheckNotADatasetFile(dir_ + "/own.html", ds_, "w").ok());
  EXPECT_TRUE(CheckNotADatasetFile(ds_ + "/train.manifest.json", dir_ + "/missing/x", "w").ok());
}

// A raw input file (an IDX file the run reads outside any dataset's files) by its path spelled
// another way, a hard link or a symbolic link; a checkpoint not written yet by its path alone.
TEST_F(DatasetFilesTest, AnOutputThatIsAnInputFileUnderAnyNameIsRefused) {
  const std::string input = dir_ + "/train-images-idx3-ubyte";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), input, "idx").ok());
  ASSERT_EQ(::link(input.c_str(), (dir_ + "/hard.json").c_str()), 0);
  ASSERT_EQ(::symlink(input.c_str(), (dir_ + "/soft.json").c_str()), 0);
  for (const std::string& out :
       {input, ds_ + "/../train-images-idx3-ubyte", dir_ + "/hard.json", dir_ + "/soft.json"}) {
    const absl::Status s = CheckNotAnInputFile(out, input, "--report-json", "the --data IDX file");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << out;
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("--report-json ", out,
                                                                 " is the --data IDX file the run "
                                                                 "reads (",
                                                                 input, "): it would replace it")));
  }
  EXPECT_TRUE(CheckNotAnInputFile(dir_ + "/r.json", input, "w", "x").ok());
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/ck").ok());
  EXPECT_FALSE(CheckNotAnInputFile(dir_ + "/ck/x", dir_ + "/ck/./x", "w", "x").ok());
}

// The cache: a dataset sharded from IDX input (<cache>/<hash>/) and the measured ceilings are
// refused; anything else under the cache directory is not.
TEST_F(DatasetFilesTest, AnOutputThatIsAFileTheCacheHoldsIsRefused) {
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/ceilings").ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/ceilings/k.json", "{}").ok());
  EXPECT_FALSE(CheckNotACacheFile(ds_ + "/train.manifest.json", dir_, "w").ok());
  EXPECT_FALSE(CheckNotACacheFile(ds_ + "/new.manifest.json", dir_, "w").ok());
  EXPECT_FALSE(CheckNotACacheFile(dir_ + "/ceilings/k.json", dir_, "w").ok());
  ASSERT_EQ(::link((dir_ + "/ceilings/k.json").c_str(), (dir_ + "/k.html").c_str()), 0);
  EXPECT_FALSE(CheckNotACacheFile(dir_ + "/k.html", dir_, "w").ok());
  EXPECT_TRUE(CheckNotACacheFile(dir_ + "/report.json", dir_, "w").ok());
  EXPECT_TRUE(CheckNotACacheFile(ds_ + "/report.json", dir_, "w").ok());
  EXPECT_TRUE(CheckNotACacheFile(ds_ + "/train.manifest.json", dir_ + "/missing", "w").ok());
}

}  // namespace
}  // namespace sluice
