// The outputs of a run: never one that names another output or a file the run reads, and the
// start-up check fails where the write would, without blocking on a FIFO.
#include "engine/job/outputs.h"

#include <fcntl.h>
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

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_outputs_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/ds").ok());
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/ds/train.manifest.json", "{}").ok());
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  TrainJobOptions Job() const {
    TrainJobOptions o;
    o.data = dir_ + "/ds";
    return o;
  }
  std::string dir_;
};

TEST_F(OutputsTest, AnOutputThatNamesADatasetFileIsRefused) {
  absl::Status s =
      CheckOutputsAreNotInputs({{"report-json", dir_ + "/ds/train.manifest.json"}}, Job());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is a file of the dataset"));
  TrainJobOptions o = Job();
  o.export_safetensors = dir_ + "/ds/../ds/train-00001-0123456789abcdef.shard";
  EXPECT_FALSE(CheckOutputsAreNotInputs({}, o).ok());
  o.export_safetensors = dir_ + "/ds/model.safetensors";  // beside the data: fine
  EXPECT_TRUE(CheckOutputsAreNotInputs({{"report-json", dir_ + "/r.json"}}, o).ok());
}

// Another name of the manifest (a hard link) used to pass the path comparison; the shared
// check (storage/dataset_files.h) compares the device and inode too.
TEST_F(OutputsTest, AnOutputThatIsAHardLinkToTheManifestIsRefused) {
  ASSERT_EQ(::link((dir_ + "/ds/train.manifest.json").c_str(), (dir_ + "/r.json").c_str()), 0);
  absl::Status s = CheckOutputsAreNotInputs({{"report-json", dir_ + "/r.json"}}, Job());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--report-json " + dir_ + "/r.json is a file of the dataset in"));
}

TEST_F(OutputsTest, TwoOutputsOnOneFileOrAnOutputOnTheResumedCheckpointAreRefused) {
  absl::Status s = CheckOutputsAreNotInputs(
      {{"report-json", dir_ + "/same.out"}, {"trace", dir_ + "/./same.out"}}, Job());
  EXPECT_THAT(std::string(s.message()), HasSubstr("--trace and --report-json name the same file"));
  TrainJobOptions o = Job();
  o.resume = dir_ + "/c.sluice";
  o.export_safetensors = dir_ + "/c.sluice";
  s = CheckOutputsAreNotInputs({}, o);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is the --resume file the run reads"));
}

TEST_F(OutputsTest, TheProbeFailsWhereTheWriteWouldAndNeverWaitsOnAFifo) {
  ASSERT_EQ(::mkdir((dir_ + "/out.json.tmp").c_str(), 0755), 0);
  EXPECT_FALSE(ProbeWritable(Env::Default(), dir_ + "/out.json", "report-json").ok());
  // A FIFO without a reader: opening it for writing would block, and so would the write after
  // training; the probe refuses it at once.
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  absl::Status s = ProbeWritable(Env::Default(), fifo, "report-html");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), absl::StrCat("--report-html ", fifo,
                                      ": a FIFO that no process is reading (start its reader "
                                      "first)"));
  // With a reader it is accepted, and nothing is created beside it.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_TRUE(ProbeWritable(Env::Default(), fifo, "report-json").ok());
  ::close(reader);
  EXPECT_FALSE(Env::Default()->FileExists(fifo + ".tmp"));
  // A name of 251 characters is legal, and so is its temporary (255).
  const std::string long_name = dir_ + "/" + std::string(251, 'a');
  EXPECT_TRUE(ProbeWritable(Env::Default(), long_name, "report-json").ok());
}

}  // namespace
}  // namespace sluice
