// sluice-train with --transforms and images of any shape: the MLP takes the chain's output,
// a chain that does not fit fails at start naming it, and a resume with another chain is
// refused naming both.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/stages.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "tests/tools/learnable_records.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using Output = testing::ToolOutput;
using testing::FinalAccuracy;

Output RunTrain(const std::string& args) {
  return testing::RunShell(absl::StrCat(SLUICE_TRAIN_BIN, " ", args));
}

// `count` 3-channel 32x32 images (HWC, as NumPy's channels-last arrays): class c lights row
// band c in channel c % 3 over a noise floor.
RecordArrays ColourRecords(uint64_t count, uint64_t seed) {
  RecordArrays r;
  r.spec = {SampleDType::kU8, LabelDType::kU8, 32, 32, 3};
  r.count = count;
  r.samples.resize(count * r.spec.sample_bytes());
  r.labels.resize(count);
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng() % 10);
    r.labels[i] = static_cast<char>(label);
    for (int p = 0; p < 32 * 32 * 3; ++p) {
      const int row = p / (32 * 3), channel = p % 3;
      const bool lit = channel == label % 3 && row >= label * 3 && row < label * 3 + 3;
      r.samples[i * 3072 + p] = static_cast<char>(lit ? 128 + rng() % 128 : rng() % 40);
    }
  }
  return r;
}

class SluiceTrainTransformsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice_train_transforms_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    WriteDatasetOptions options;
    options.sharding.records_per_shard = 1500;
    options.sharding.records_per_frame = 100;
    for (const auto& [split, count, seed] :
         {std::tuple{"train", 4000, 1}, std::tuple{"test", 1000, 2}}) {
      ASSERT_TRUE(WriteDataset(Env::Default(), dir_ + "/gray", split,
                               testing::MakeLearnableRecords(count, seed, 40), options)
                      .ok());
      ASSERT_TRUE(
          WriteDataset(Env::Default(), dir_ + "/colour", split, ColourRecords(count, seed), options)
              .ok());
    }
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf ", dir_).c_str()); }
  std::string dir_;
};

TEST_F(SluiceTrainTransformsTest, TrainsThroughARandomChainAndPrintsTheAccuracy) {
  Output out =
      RunTrain(absl::StrCat("--data=", dir_,
                            "/gray --device=cpu --epochs=3 --quiet "
                            "--transforms='RandomCrop(28, padding=2), RandomHorizontalFlip()'"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  // Chance is 0.1. A crop shifted by 2 rows moves a class's band onto its neighbour's, so the
  // bar is lower than without the chain.
  EXPECT_GT(FinalAccuracy(out.text), 0.3) << out.text;
}

// A random training chain evaluates through its deterministic form, said at start; an
// --eval-transforms is taken as given, and one whose samples are not the model's input fails
// at start naming the flag and both shapes.
TEST_F(SluiceTrainTransformsTest, ARandomChainEvaluatesThroughItsDeterministicForm) {
  const std::string common =
      absl::StrCat("--data=", dir_, "/gray --device=cpu --epochs=1 --quiet ",
                   "--transforms='RandomCrop(28, padding=2), RandomHorizontalFlip()' ");
  Output out = RunTrain(common);
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("--transforms is random; the test split is evaluated through "
                          "'CenterCrop(size=(28, 28))'"),
            std::string::npos)
      << out.text;
  EXPECT_GT(FinalAccuracy(out.text), 0.3) << out.text;
  out = RunTrain(common + "--eval-transforms='RandomCrop(28, padding=2)'");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(out.text.find("--transforms is random"), std::string::npos) << out.text;
  out = RunTrain(common + "--eval-transforms='CenterCrop(24)'");
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("--eval-transforms: the test samples after it are u8 1x24x24 CHW, but "
                          "the model trains on u8 1x28x28 CHW"),
            std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find("step "), std::string::npos) << "trained before failing: " << out.text;
  // The same f32 batches, but x/255 against normalized values: refused too.
  out = RunTrain(absl::StrCat("--data=", dir_, "/gray --device=cpu --epochs=1 --quiet ",
                              "--transforms='RandomCrop(28, padding=2), Normalize(mean=[0.5], "
                              "std=[0.25])' --eval-transforms='CenterCrop(28)'"));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("the test samples after it are u8 1x28x28 CHW, but the model trains on "
                          "f32 1x28x28 CHW"),
            std::string::npos)
      << out.text;
  out = RunTrain(common + "--eval-transforms='CenterCrop(24'");
  EXPECT_EQ(out.exit_code, 2) << out.text;
  EXPECT_NE(out.text.find("--eval-transforms"), std::string::npos) << out.text;
  // A deterministic chain evaluates as it trains: nothing to say.
  out = RunTrain(absl::StrCat("--data=", dir_, "/gray --device=cpu --epochs=1 --quiet ",
                              "--transforms='CenterCrop(28)'"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_EQ(out.text.find("the test split is evaluated through"), std::string::npos) << out.text;
}

TEST_F(SluiceTrainTransformsTest, ThreeChannelImagesTrainWithTheirOwnInputWidth) {
  Output out = RunTrain(absl::StrCat("--data=", dir_,
                                     "/colour --device=cpu --epochs=3 --quiet "
                                     "--layers=3072,64,10"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_GT(FinalAccuracy(out.text), 0.5) << out.text;
  // Cropped to 24x24 by the chain, the model takes 3x24x24 and normalizes to f32 in the chain.
  out = RunTrain(absl::StrCat(
      "--data=", dir_,
      "/colour --device=cpu --epochs=2 --quiet --layers=1728,64,10 --transforms='CenterCrop(24), "
      "Normalize(mean=[0.1, 0.1, 0.1], std=[0.3, 0.3, 0.3])'"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_GT(FinalAccuracy(out.text), 0.3) << out.text;
}

TEST_F(SluiceTrainTransformsTest, AFirstLayerOfTheWrongWidthNamesTheSpecAfterTheTransforms) {
  Output out = RunTrain(absl::StrCat("--data=", dir_,
                                     "/colour --device=cpu --epochs=1 --layers=784,10 "
                                     "--transforms='RandomCrop(24)'"));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("--layers: the first layer takes 784 values, the samples after "
                          "--transforms are u8 3x24x24 (1728)"),
            std::string::npos)
      << out.text;
}

TEST_F(SluiceTrainTransformsTest, ASampleLargerThanAnyLayerSaysSoInsteadOfALayerSize) {
  // 3x100000x100000 values: the message said "start --layers with 30000000000", a size above
  // the 2^30 values --layers accepts.
  Output out = RunTrain(absl::StrCat("--data=", dir_,
                                     "/colour --device=cpu --epochs=1 --layers=3072,10 "
                                     "--transforms='Resize((100000,100000))'"));
  EXPECT_EQ(out.exit_code, 1) << out.text;
  EXPECT_NE(out.text.find("too large for any model (a layer takes at most 1073741824 values"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("smaller Resize or crop"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("start --layers with"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("step "), std::string::npos) << "trained before failing: " << out.text;
}

TEST_F(SluiceTrainTransformsTest, BadChainsFailAtStartWithOneLineNamingTheFlag) {
  // A string that does not parse is a usage error (exit 2); a chain that does not fit the
  // samples is found when the data is opened (exit 1, as other misfits of flags and data).
  for (const auto& [bad, code] : {std::pair{"Bogus()", 2}, std::pair{"RandomCrop(28, padding=2", 2},
                                  std::pair{"RandomCrop(40, padding=2)", 1},
                                  std::pair{"Normalize(mean=[0.5, 0.5], std=[1, 1])", 1},
                                  std::pair{"RandomCrop(28, padding=2), ToDtype(bfloat16)", 1}}) {
    Output out = RunTrain(absl::StrCat("--data=", dir_, "/colour --device=cpu --epochs=1 ",
                                       "--layers=3072,10 --transforms='", bad, "'"));
    EXPECT_EQ(out.exit_code, code) << bad << "\n" << out.text;
    EXPECT_NE(out.text.find("--transforms"), std::string::npos) << bad << "\n" << out.text;
    EXPECT_EQ(out.text.find("step "), std::string::npos) << "trained before failing: " << out.text;
  }
  // A chain that outputs floats with a normalization flag too would normalize twice.
  Output out =
      RunTrain(absl::StrCat("--data=", dir_, "/gray --device=cpu --epochs=1 --normalize-mean=0.1 ",
                            "--transforms='Normalize(mean=[0.5], std=[0.2])'"));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("--normalize-mean/--normalize-std is set"), std::string::npos)
      << out.text;
}

TEST_F(SluiceTrainTransformsTest, ResumeWithOtherTransformsIsRefusedNamingBothChains) {
  const std::string common = absl::StrCat(
      "--data=", dir_, "/gray --device=cpu --epochs=2 --quiet --checkpoint-dir=", dir_, "/ckpt");
  Output out = RunTrain(absl::StrCat(common, " --stop-after-steps=20 --checkpoint-every=20 ",
                                     "--transforms='RandomCrop(28, padding=2)'"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  out = RunTrain(absl::StrCat(common, " --resume=auto --transforms='RandomHorizontalFlip()'"));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("transforms: RandomCrop("), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("RandomHorizontalFlip(p=0.5) now"), std::string::npos) << out.text;
  // The same chain, spelled differently, is the same run.
  out =
      RunTrain(absl::StrCat(common, " --resume=auto --transforms='RandomCrop(size=28,padding=2)'"));
  EXPECT_EQ(out.exit_code, 0) << out.text;
}

nlohmann::json ReadJson(const std::string& path) {
  auto text = ReadFileToString(Env::Default(), path);
  EXPECT_TRUE(text.ok()) << path;
  return text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
}

// The report splits preprocess between the chain's ops: the normalize of 3x32x32 to f32 into
// the batch buffer costs far more than a flip that flips nothing, so it has the largest share
// (timing: the best of 3 runs); shares in [0, 100] adding up to 100 with the rest. The
// preprocess ceiling goes through the same chain, and a run without a chain has no ops and a
// ceiling of its own.
TEST_F(SluiceTrainTransformsTest, ReportSplitsPreprocessBetweenTheOpsAndCeilingsUseTheChain) {
  const std::string chain =
      "--transforms='RandomHorizontalFlip(p=0), Normalize(mean=[0.1, 0.1, 0.1], std=[0.3, 0.3, "
      "0.3])' --layers=3072,10 ";
  const std::string common = absl::StrCat("--data=", dir_, "/colour --device=cpu --epochs=1 ",
                                          "--quiet --evaluate=false --cache-dir=", dir_, "/cache ",
                                          "--report-json=", dir_, "/report.json ");
  nlohmann::json pre;
  std::string text;
  for (int attempt = 0; attempt < 3; ++attempt) {
    Output out = RunTrain(common + chain);
    ASSERT_EQ(out.exit_code, 0) << out.text;
    text = out.text;
    const nlohmann::json report = ReadJson(dir_ + "/report.json");
    pre = report["stages"][ReportRow(Stage::kPreprocess)];
    ASSERT_EQ(pre["stage"], "preprocess");
    ASSERT_TRUE(pre["ops"].is_array()) << pre.dump();
    ASSERT_EQ(pre["ops"].size(), 2u);
    EXPECT_NE(report["ceilings"]["preprocess"]["note"].get<std::string>().find(
                  "the run's transforms (RandomHorizontalFlip(p=0"),
              std::string::npos)
        << report["ceilings"].dump();
    double largest = -1;
    std::string largest_op;
    double sum = pre["outside_chain_pct"].get<double>();
    for (const nlohmann::json& op : pre["ops"]) {
      const double share = op["share_pct"].get<double>();
      EXPECT_GE(share, 0);
      EXPECT_LE(share, 100);
      sum += share;
      if (share > largest) largest = share, largest_op = op["op"].get<std::string>();
    }
    EXPECT_NEAR(sum, 100, 1e-6) << pre.dump();
    if (largest_op.rfind("Normalize(", 0) == 0) break;
  }
  std::string largest_op;
  double largest = -1;
  for (const nlohmann::json& op : pre["ops"]) {
    if (op["share_pct"].get<double>() > largest) {
      largest = op["share_pct"].get<double>();
      largest_op = op["op"].get<std::string>();
    }
  }
  EXPECT_EQ(largest_op.rfind("Normalize(", 0), 0u) << pre.dump();
  EXPECT_NE(text.find("  chain: "), std::string::npos) << text;
  EXPECT_NE(text.find("outside the chain"), std::string::npos) << text;

  Output out = RunTrain(common + "--layers=3072,10");
  ASSERT_EQ(out.exit_code, 0) << out.text;
  const nlohmann::json report = ReadJson(dir_ + "/report.json");
  const nlohmann::json& row = report["stages"][ReportRow(Stage::kPreprocess)];
  EXPECT_TRUE(row["ops"].is_null()) << row.dump();
  EXPECT_NE(report["ceilings"]["preprocess"]["note"].get<std::string>().find("SampleConverter"),
            std::string::npos);
  // One cached ceiling file per chain.
  auto files = Env::Default()->GetChildren(dir_ + "/cache/ceilings");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->size(), 2u);
}

// --what-if=transforms removes the chain's cost and says so, and that the accuracy means
// nothing; without a chain it is refused.
TEST_F(SluiceTrainTransformsTest, WhatIfTransformsRunsWithTheChainFree) {
  Output out = RunTrain(absl::StrCat("--data=", dir_,
                                     "/colour --device=cpu --epochs=1 --quiet --evaluate=false ",
                                     "--ceilings=false --layers=3072,10 --what-if=transforms "
                                     "--transforms='RandomCrop(32, padding=4)'"));
  ASSERT_EQ(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("what-if: transforms was free in this run"), std::string::npos)
      << out.text;
  // The replayed samples make the accuracy meaningless, and the run says so.
  EXPECT_NE(out.text.find("the accuracy above means nothing"), std::string::npos) << out.text;
  out = RunTrain(absl::StrCat("--data=", dir_,
                              "/colour --device=cpu --epochs=1 --quiet --evaluate=false "
                              "--ceilings=false --layers=3072,10 --what-if=transforms"));
  EXPECT_NE(out.exit_code, 0) << out.text;
  EXPECT_NE(out.text.find("the run has no transforms"), std::string::npos) << out.text;
}

}  // namespace
}  // namespace sluice
