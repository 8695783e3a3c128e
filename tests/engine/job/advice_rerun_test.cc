// RerunAdvice, AdviceChecksText and the Loader's reruns: the part of --check-advice that
// sluice-train and sluice.Loader share (engine/job/advice_rerun.h), with spans that return set
// rates instead of running anything.
#include "engine/job/advice_rerun.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

const Advice kThreads{AdviceSetting::kDecompressThreads, "4", ""};
const Advice kZstd{AdviceSetting::kZstdLevel, "1", ""};

TEST(AdviceCheckRerunTest, RunsRoundsOfBeforeThenAfterAndKeepsTheBetterRateOfEach) {
  std::vector<std::string> calls;
  std::vector<double> rates = {100, 150, 120, 140};  // before, after, before, after
  size_t next = 0;
  const AdviceSpan span = [&](const Advice* change, int round) -> absl::StatusOr<double> {
    calls.push_back(absl::StrCat(change == nullptr ? "before" : change->value, "/", round));
    return rates[next++];
  };
  const auto not_run = [](const Advice& a) {
    return a.setting == AdviceSetting::kZstdLevel ? std::string("a dataset setting") : "";
  };
  absl::StatusOr<std::vector<AdviceCheck>> checks =
      RerunAdvice({kZstd, kThreads}, /*rounds=*/2, not_run, span);
  ASSERT_TRUE(checks.ok()) << checks.status();
  ASSERT_EQ(checks->size(), 2u);
  EXPECT_EQ((*checks)[0].note, "a dataset setting");
  EXPECT_EQ((*checks)[0].before_samples_per_s, 0);
  EXPECT_EQ((*checks)[0].speedup(), 0);
  EXPECT_EQ((*checks)[1].note, "");
  EXPECT_EQ((*checks)[1].before_samples_per_s, 120);
  EXPECT_EQ((*checks)[1].after_samples_per_s, 150);
  EXPECT_EQ((*checks)[1].speedup(), 150.0 / 120.0);
  EXPECT_EQ(calls, (std::vector<std::string>{"before/0", "4/0", "before/1", "4/1"}));
}

TEST(AdviceCheckRerunTest, AZeroRoundCountRunsOnceAndASpanErrorEndsTheCheck) {
  int runs = 0;
  const auto counting = [&](const Advice*, int) -> absl::StatusOr<double> { return ++runs; };
  const auto run_all = [](const Advice&) { return std::string(); };
  ASSERT_TRUE(RerunAdvice({kThreads}, /*rounds=*/0, run_all, counting).ok());
  EXPECT_EQ(runs, 2);
  const auto failing = [](const Advice*, int) -> absl::StatusOr<double> {
    return absl::DataLossError("shard 3");
  };
  EXPECT_EQ(RerunAdvice({kThreads}, 1, run_all, failing).status().message(), "shard 3");
}

TEST(AdviceCheckRerunTest, TextIsWordedForEachConsumer) {
  AdviceCheck ran{kThreads, "", 100000, 150000};
  AdviceCheck flat{{AdviceSetting::kReadAhead, "8", ""}, "", 100000, 105000};
  AdviceCheck not_run{kZstd, "a setting of the dataset", 0, 0};
  EXPECT_EQ(AdviceChecksText({ran, flat, not_run}, Consumer::kTrainJob, 200, 2),
            "\ncheck-advice (each change against the run as it was, 200 steps, the better of 2 "
            "runs each):\n"
            "  --decompress-threads=4       before    100.0 k  after    150.0 k samples/s  1.50x\n"
            "  --read-ahead=8               before    100.0 k  after    105.0 k samples/s  1.05x"
            "  (less than 1.1x: this advice did not pay here)\n"
            "  sluice-shard create --zstd-level=1 not run: a setting of the dataset\n");
  EXPECT_EQ(
      AdviceChecksText({ran}, Consumer::kPython, 100, 1),
      "\ncheck-advice (each change against the loader as it was, 100 batches with your "
      "step as a sleep, the better of 1 runs each):\n"
      "  decompress_threads=4         before    100.0 k  after    150.0 k samples/s  1.50x\n");
  // Under 10 k samples/s the rates are whole samples: "0.2 k" and "0.3 k" beside 1.84x read
  // as 1.5x.
  AdviceCheck slow{kThreads, "", 274, 504};
  EXPECT_EQ(
      AdviceChecksText({slow}, Consumer::kTrainJob, 50, 2),
      "\ncheck-advice (each change against the run as it was, 50 steps, the better of 2 "
      "runs each):\n"
      "  --decompress-threads=4       before        274  after        504 samples/s  1.84x\n");
  // Nothing rerun (a change to the data alone): the header promises no steps or runs.
  EXPECT_EQ(AdviceChecksText({not_run}, Consumer::kTrainJob, 50, 2),
            "\ncheck-advice (no entry is a change a rerun can make):\n"
            "  sluice-shard create --zstd-level=1 not run: a setting of the dataset\n");
  EXPECT_EQ(AdviceChecksText({}, Consumer::kTrainJob, 0, 0),
            "\ncheck-advice: the report suggests no change of a setting\n");
  EXPECT_EQ(AdviceChecksText({}, Consumer::kPython, 0, 0),
            "\ncheck-advice: the report suggests no change of an argument\n");
}

TEST(AdviceCheckRerunTest, ALoaderRerunSetsItsArgumentsAndSaysWhyNotTheRest) {
  absl::StatusOr<LoaderChange> change = LoaderRerunChange(kThreads);
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->argument, "decompress_threads");
  EXPECT_EQ(change->value, 4);
  for (AdviceSetting s : {AdviceSetting::kReadAhead, AdviceSetting::kPreprocessThreads,
                          AdviceSetting::kPoolSize, AdviceSetting::kDeviceRingDepth}) {
    EXPECT_EQ(LoaderRerunNote(s), "") << AdviceFlag(s);
  }
  EXPECT_NE(LoaderRerunNote(AdviceSetting::kH2DFormat).find("dtype changes what your step"),
            std::string::npos);
  EXPECT_NE(LoaderRerunNote(AdviceSetting::kCudaGraph).find("CUDA backend"), std::string::npos);
  EXPECT_NE(LoaderRerunNote(AdviceSetting::kZstdLevel).find("sluice-shard create"),
            std::string::npos);
  EXPECT_EQ(LoaderRerunChange(kZstd).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LoaderRerunChange({AdviceSetting::kPoolSize, "many", ""}).status().message(),
            "advice pool_size: not an int: 'many'");
}

TEST(AdviceCheckRerunTest, TheSimulatedStepIsTheComputeBusyTimePerStep) {
  EXPECT_EQ(LoaderStepSeconds(3'000'000'000, 1000), 3e9 / 1e9 / 1000);
  EXPECT_EQ(LoaderStepSeconds(5, 0), 0.0);
}

}  // namespace
}  // namespace sluice
