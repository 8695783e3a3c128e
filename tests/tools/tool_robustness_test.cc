// End-to-end tests of the tools against a hostile environment (issue 35, round 3;
// docs/limits.md, "Files sluice writes" and "Bounds on flags"): outputs that name a file the run
// reads outside the --data folder (the --test-data dataset, raw IDX input, the IDX cache), a
// stdout pipe closed early, a stdout that cannot be written (/dev/full), and Abseil's
// --flagfile. Every run goes through `timeout`, so a hang fails the test instead of holding CI.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "storage/dataset_writer.h"
#include "storage/idx.h"
#include "tests/tools/learnable_records.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using Output = testing::ToolOutput;

class ToolRobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_tool_robustness_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    WriteDatasetOptions options;
    options.sharding.records_per_shard = 1000;
    options.sharding.records_per_frame = 100;
    ASSERT_TRUE(WriteDataset(Env::Default(), dir_ + "/data", "train",
                             testing::MakeLearnableRecords(1000, 1, 40), options)
                    .ok());
    ASSERT_TRUE(WriteDataset(Env::Default(), dir_ + "/other", "test",
                             testing::MakeLearnableRecords(200, 2, 40), options)
                    .ok());
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }

  // sluice-train, one CPU epoch, its cache under the test's directory, under a 60 s timeout.
  Output Train(const std::string& args, const std::string& redirect = "") const {
    return testing::RunShell(absl::StrCat(
        "(SLUICE_CACHE_DIR=", dir_, "/cache timeout 60 ", SLUICE_TRAIN_BIN,
        " --device=cpu --epochs=1 --ceilings=false --quiet ", args, " ", redirect, ")"));
  }
  std::string Read(const std::string& path) const {
    absl::StatusOr<std::string> text = ReadFileToString(Env::Default(), path);
    return text.ok() ? *text : "<unreadable>";
  }
  // MNIST-named IDX files in dir_/idx: train-* and t10k-*.
  void WriteIdx() const {
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_ + "/idx").ok());
    ASSERT_TRUE(
        WriteIdxPair(Env::Default(), dir_ + "/idx/train", testing::MakeLearnableRecords(300, 3, 40))
            .ok());
    ASSERT_TRUE(
        WriteIdxPair(Env::Default(), dir_ + "/idx/t10k", testing::MakeLearnableRecords(100, 4, 40))
            .ok());
  }
  std::string dir_;
};

// --report-json over the --test-data manifest, --metrics-out over one of its shards: both
// passed the check (which looked at the --data folder alone), the run exited 0 and the test
// split was destroyed.
TEST_F(ToolRobustnessTest, AnOutputOverAFileOfTheTestDataDatasetIsRefused) {
  const std::string manifest = dir_ + "/other/test.manifest.json";
  const std::string before = Read(manifest);
  std::vector<std::string> shards;
  const std::vector<std::string> names = Env::Default()->GetChildren(dir_ + "/other").value();
  for (const std::string& name : names) {
    if (name.size() > 6 && name.substr(name.size() - 6) == ".shard") {
      shards.push_back(dir_ + "/other/" + name);
    }
  }
  ASSERT_FALSE(shards.empty());
  const std::string shard_before = Read(shards[0]);
  for (const std::string& args :
       {absl::StrCat("--report-json=", manifest), absl::StrCat("--metrics-out=", shards[0]),
        absl::StrCat("--trace=", dir_, "/other/../other/test.manifest.json"),
        absl::StrCat("--export-safetensors=", shards[0]),
        absl::StrCat("--record-order=", manifest)}) {
    const Output out =
        Train(absl::StrCat("--data=", dir_, "/data --test-data=", dir_, "/other ", args));
    EXPECT_EQ(out.exit_code, 1) << args << "\n" << out.text;
    EXPECT_NE(out.text.find("is a file of the dataset in"), std::string::npos) << out.text;
    EXPECT_EQ(Read(manifest), before) << args;
    EXPECT_EQ(Read(shards[0]), shard_before) << args;
  }
}

// --data names a folder of raw IDX files: --report-json over train-images-idx3-ubyte and
// --report-html over t10k-images-idx3-ubyte (read as the test split) replaced the user's files,
// exit 0. A symbolic link to one, elsewhere, is the same file.
TEST_F(ToolRobustnessTest, AnOutputOverARawIdxInputFileIsRefused) {
  WriteIdx();
  const std::string train = dir_ + "/idx/train-images-idx3-ubyte";
  const std::string t10k = dir_ + "/idx/t10k-images-idx3-ubyte";
  const std::string train_before = Read(train), t10k_before = Read(t10k);
  ASSERT_EQ(::symlink(t10k.c_str(), (dir_ + "/link.html").c_str()), 0);
  for (const std::string& args :
       {absl::StrCat("--report-json=", train), absl::StrCat("--report-html=", t10k),
        absl::StrCat("--report-html=", dir_, "/link.html"),
        absl::StrCat("--metrics-out=", dir_, "/idx/./t10k-labels-idx1-ubyte")}) {
    const Output out = Train(absl::StrCat("--data=", dir_, "/idx ", args));
    EXPECT_EQ(out.exit_code, 1) << args << "\n" << out.text;
    EXPECT_NE(out.text.find("is the --data IDX file the run reads"), std::string::npos) << out.text;
    EXPECT_EQ(Read(train), train_before) << args;
    EXPECT_EQ(Read(t10k), t10k_before) << args;
  }
  // The same files given as --test-data.
  const Output out =
      Train(absl::StrCat("--data=", dir_, "/data --test-data=", dir_, "/idx --report-json=", t10k));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("is the --test-data IDX file the run reads"), std::string::npos)
      << out.text;
  EXPECT_EQ(Read(t10k), t10k_before);
}

// The IDX input is sharded into the cache (<cache>/<hash>/train.manifest.json): an output over
// that manifest replaced it, and the next run read a report as its dataset.
TEST_F(ToolRobustnessTest, AnOutputOverTheIdxCachesDatasetIsRefused) {
  WriteIdx();
  const std::string cache = dir_ + "/cache";
  Output first = Train(absl::StrCat("--data=", dir_, "/idx --cache-dir=", cache));
  ASSERT_EQ(first.exit_code, 0) << first.text;
  std::string sharded;
  const std::vector<std::string> names = Env::Default()->GetChildren(cache).value();
  for (const std::string& name : names) {
    if (Env::Default()->FileExists(JoinPath(cache, name) + "/train.manifest.json")) {
      sharded = JoinPath(cache, name);
    }
  }
  ASSERT_FALSE(sharded.empty());
  const std::string manifest = sharded + "/train.manifest.json";
  const std::string before = Read(manifest);
  const Output out =
      Train(absl::StrCat("--data=", dir_, "/idx --cache-dir=", cache, " --report-json=", manifest));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("is a file of the dataset in"), std::string::npos) << out.text;
  EXPECT_EQ(Read(manifest), before);
  // A report beside the cache (--cache-dir=. with reports in .) is not refused.
  const Output beside = Train(absl::StrCat("--data=", dir_, "/idx --cache-dir=", cache,
                                           " --report-json=", cache, "/report.json"));
  EXPECT_EQ(beside.exit_code, 0) << beside.text;
}

// sluice-shard create: an input that is a file of the --out dataset would be replaced by the
// write it feeds.
TEST_F(ToolRobustnessTest, ShardCreateRefusesAnInputThatIsAFileOfTheOutDataset) {
  const std::string list = dir_ + "/data/train.manifest.json";
  const std::string before = Read(list);
  const Output out = testing::RunShell(absl::StrCat(
      "timeout 60 ", SLUICE_SHARD_BIN, " create --image-list=", list, " --out=", dir_, "/data"));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("is a file of the dataset --out"), std::string::npos) << out.text;
  EXPECT_EQ(Read(list), before);
}

// Each output is written as "<path>.tmp" and renamed: --metrics-out o/r.json.tmp beside
// --report-json o/r.json was lost with exit 0, and a --resume checkpoint named <output>.tmp was
// removed by the check at start. Both are refused at start now, before anything is written.
TEST_F(ToolRobustnessTest, AnOutputOrInputNamedAsAnotherOutputsTemporaryIsRefused) {
  const Output lost = Train(absl::StrCat("--data=", dir_, "/data --report-json=", dir_,
                                         "/r.json --metrics-out=", dir_, "/r.json.tmp"));
  EXPECT_EQ(lost.exit_code, 1) << lost.text;
  EXPECT_NE(lost.text.find("is the temporary file of --report-json"), std::string::npos)
      << lost.text;
  EXPECT_FALSE(Env::Default()->FileExists(dir_ + "/r.json"));
  const std::string checkpoint = dir_ + "/run1.tmp";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), checkpoint, "not really a checkpoint").ok());
  const Output kept = Train(absl::StrCat("--data=", dir_, "/data --resume=", checkpoint,
                                         " --report-json=", dir_, "/run1"));
  EXPECT_EQ(kept.exit_code, 1) << kept.text;
  EXPECT_NE(kept.text.find("the temporary file of --report-json"), std::string::npos) << kept.text;
  EXPECT_EQ(Read(checkpoint), "not really a checkpoint");
}

// `--report-json=-` with stdout appended to the dataset's own manifest: the JSON went into the
// manifest with exit 0, and the dataset could no longer be read.
TEST_F(ToolRobustnessTest, AnOutputOnStdoutRedirectedIntoAFileOfTheDataIsRefused) {
  const std::string manifest = dir_ + "/data/train.manifest.json";
  const std::string before = Read(manifest);
  const Output out =
      Train(absl::StrCat("--data=", dir_, "/data --report-json=-"), ">> " + manifest);
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_EQ(Read(manifest), before);
}

// --stop-after-steps on an epoch's last step: that epoch's metrics line was dropped (1 epoch of
// 10 steps and --stop-after-steps=10 wrote no metrics file at all).
TEST_F(ToolRobustnessTest, AStopOnAnEpochsLastStepKeepsThatEpochsMetricsLine) {
  for (const int steps : {10, 20}) {
    const std::string metrics = absl::StrCat(dir_, "/m", steps, ".jsonl");
    const Output out =
        Train(absl::StrCat("--data=", dir_, "/data --batch-size=100 --epochs=3 ",
                           "--stop-after-steps=", steps, " --metrics-out=", metrics));
    EXPECT_EQ(out.exit_code, 0) << out.text;
    const std::string text = Read(metrics);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), steps / 10) << text;
  }
}

// sluice-shard create: an input named as a temporary of a --out dataset file is consumed by the
// write (the writer's temporary replaces it, or its leftover is removed).
TEST_F(ToolRobustnessTest, ShardCreateRefusesAnInputNamedAsATemporaryOfTheOutDataset) {
  const std::string list = dir_ + "/data/train.manifest.json.tmp";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), list, "a.jpg 0\n").ok());
  const Output out = testing::RunShell(absl::StrCat(
      "timeout 60 ", SLUICE_SHARD_BIN, " create --image-list=", list, " --out=", dir_, "/data"));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("is a file of the dataset --out"), std::string::npos) << out.text;
  EXPECT_EQ(Read(list), "a.jpg 0\n");
}

// `sluice-train ... | head -c 20`: the first write after head left killed the process with
// SIGPIPE (exit 141) before the checkpoint and the reports were written.
TEST_F(ToolRobustnessTest, AStdoutPipeClosedEarlyLosesNoOutputAndExitsZero) {
  const Output out = testing::RunShell(absl::StrCat(
      "({ SLUICE_CACHE_DIR=", dir_, "/cache timeout 60 ", SLUICE_TRAIN_BIN, " --data=", dir_,
      "/data --evaluate=false --device=cpu --epochs=3 --ceilings=false --checkpoint-dir=", dir_,
      "/ck --report-json=", dir_, "/r.json --report-html=", dir_,
      "/r.html; echo \"exit=$?\" >&2; } | head -c 20 >/dev/null)"));
  EXPECT_NE(out.text.find("exit=0"), std::string::npos) << out.text;
  for (const char* file : {"/ck/checkpoint.sluice", "/r.json", "/r.html"}) {
    EXPECT_TRUE(Env::Default()->FileExists(dir_ + file)) << file << "\n" << out.text;
  }
}

// `> /dev/full`: every line printed was lost and the tools exited 0.
TEST_F(ToolRobustnessTest, AStdoutThatCannotBeWrittenIsAnErrorNamingStdout) {
  const Output train =
      Train(absl::StrCat("--data=", dir_, "/data --evaluate=false --report-json=", dir_, "/r.json"),
            ">/dev/full");
  EXPECT_EQ(train.exit_code, 1) << train.text;
  EXPECT_NE(train.text.find("sluice-train: stdout: write failed: No space left on device"),
            std::string::npos)
      << "the cause, as for a file output: " << train.text;
  EXPECT_TRUE(Env::Default()->FileExists(dir_ + "/r.json")) << "the file output comes first";
  const Output inspect = testing::RunShell(
      absl::StrCat("(timeout 60 ", SLUICE_SHARD_BIN, " inspect ", dir_, "/data >/dev/full)"));
  EXPECT_EQ(inspect.exit_code, 1) << inspect.text;
  EXPECT_NE(inspect.text.find("stdout: write failed"), std::string::npos) << inspect.text;
  const Output help =
      testing::RunShell(absl::StrCat("(timeout 60 ", SLUICE_SHARD_BIN, " --help >/dev/full)"));
  EXPECT_EQ(help.exit_code, 1) << help.text;
}

// --flagfile=/dev/zero and a flagfile that includes itself grew memory until killed; a missing
// flagfile exited 1. Abseil's --flagfile, --fromenv and --tryfromenv are now usage errors.
TEST_F(ToolRobustnessTest, FlagfileAndFromenvAreUsageErrors) {
  const std::string self = dir_ + "/self.flags";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), self, "--flagfile=" + self + "\n").ok());
  for (const std::string& tool : {std::string(SLUICE_TRAIN_BIN), std::string(SLUICE_SHARD_BIN)}) {
    for (const std::string& args :
         {std::string("--flagfile=/dev/zero"), "--flagfile=" + self,
          "--flagfile " + dir_ + "/missing.flags", std::string("-flagfile=/dev/zero"),
          std::string("--fromenv=epochs"), std::string("--tryfromenv=epochs")}) {
      const Output out =
          testing::RunShell(absl::StrCat("ulimit -v 4000000; timeout 20 ", tool, " create ", args));
      EXPECT_EQ(out.exit_code, 2) << tool << " " << args << "\n" << out.text;
      EXPECT_NE(out.text.find("is not supported by the sluice tools"), std::string::npos)
          << out.text;
      EXPECT_LT(out.seconds, 10) << args;
    }
    const Output help = testing::RunShell(absl::StrCat("timeout 20 ", tool, " --helpfull"));
    EXPECT_EQ(help.exit_code, 0) << help.text;
    EXPECT_EQ(help.text.find("--flagfile"), std::string::npos) << help.text;
  }
}

}  // namespace
}  // namespace sluice
