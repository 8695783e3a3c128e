// The bottleneck report of a data-parallel run (AddWorldFigures): the exchange's figures per
// step, bandwidth and all-reduce ceiling, the straggler rank that limits the job, the
// communication-bound verdict, the ranks in the text and the JSON, and the rank summaries'
// round trip.
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "report/decide/decide.h"
#include "report/decide/thresholds.h"
#include "report/stages.h"
#include "tests/report/synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::MakeRun;
using synthetic_run::Paths;
using synthetic_run::Synth;
using ::testing::HasSubstr;

constexpr int64_t kGradientBytes = 407080;  // the 784-128-10 MLP's 101,770 floats
constexpr int64_t kSteps = 1000;

// One rank of a data-parallel run: 1 s of training, `in_exchange_pct` of it in the exchange's
// collectives (90% in the gradient all-reduces, 10% agreeing on the sample count).
RankSummary SynthRank(int rank, double in_exchange_pct,
                      const std::string& verdict = "compute-bound", Stage stage = Stage::kCompute) {
  RankSummary s;
  s.rank = rank;
  s.hostname = "host";
  s.train_seconds = 1.0;
  s.samples = 32000;
  s.samples_per_s = 32000;
  s.verdict_class = verdict;
  s.limiting_stage = stage;
  s.sentence = verdict + ": rank " + std::to_string(rank) + "'s own sentence";
  s.exchange_steps = kSteps;
  s.exchange_bytes = kSteps * kGradientBytes;
  const int64_t ns = static_cast<int64_t>(in_exchange_pct / 100 * 1e9);
  s.exchange_busy_ns = ns / 10 * 9;
  s.exchange_count_ns = ns - s.exchange_busy_ns;
  s.exchange_pct = in_exchange_pct;
  for (const ReportStageInfo& info : kReportStageTable) s.stage_busy_pct.by_stage[info.stage] = 10;
  s.frames_decoded = 300;
  return s;
}

AllReduceCeiling SynthCeiling(double gb_per_s) {
  AllReduceCeiling c;
  c.measured = true;
  c.world_size = 2;
  c.local_size = 2;
  c.bytes = kGradientBytes;
  c.warmups = 3;
  c.repetitions = 20;
  c.gb_per_s = gb_per_s;
  c.median_us = kGradientBytes / gb_per_s / 1e3;
  c.note = "synthetic";
  return c;
}

BottleneckReport WorldReport(const std::vector<RankSummary>& ranks, bool cuda = false,
                             std::optional<uint64_t> frames_one_process = 400) {
  Synth s;
  s.cuda = cuda;
  const RunRecord run = MakeRun(s);
  BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  AddWorldFigures(ranks, SynthCeiling(9.046), frames_one_process, &rep);
  ApplyVerdict(Decide({.analysis = &rep, .run = &run}), &rep);
  return rep;
}

TEST(DataParallelReportTest, ExchangeFiguresPerStepBandwidthAndCeiling) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)});
  ASSERT_TRUE(rep.exchange.has_value());
  const ExchangeFigures& x = *rep.exchange;
  EXPECT_EQ(x.world_size, 2);
  EXPECT_EQ(x.steps, static_cast<uint64_t>(kSteps));
  EXPECT_EQ(x.bytes_per_step, kGradientBytes);
  // Rank 0: 120 ms in the exchange, 108 ms of it in the all-reduces, over 1000 steps.
  ASSERT_TRUE(x.time_per_step_us.has_value());
  EXPECT_NEAR(*x.time_per_step_us, 108.0, 1e-6);
  EXPECT_NEAR(x.count_time_per_step_us, 12.0, 1e-6);
  EXPECT_NEAR(x.train_pct, 12.0, 1e-9);
  // The straggler (rank 1) waits for no one: its 90 us all-reduce is the pure cost.
  EXPECT_NEAR(x.pure_pct, 10.0, 1e-9);
  ASSERT_TRUE(x.achieved_gb_per_s.has_value());
  EXPECT_NEAR(*x.achieved_gb_per_s, kGradientBytes / 90000.0, 1e-9);
  ASSERT_TRUE(x.pct_of_ceiling.has_value());
  EXPECT_NEAR(*x.pct_of_ceiling, 100.0 * kGradientBytes / 90000.0 / 9.046, 1e-6);
  ASSERT_TRUE(x.hidden_pct.has_value());
  EXPECT_EQ(*x.hidden_pct, 0.0);  // blocking on CPU
  EXPECT_THAT(x.hidden_note, HasSubstr("blocks the step's thread"));
  // 2 x 300 frames decoded for the 400 one process decodes.
  EXPECT_EQ(x.frames_decoded, 600u);
  ASSERT_TRUE(x.duplicated_decode_factor.has_value());
  EXPECT_DOUBLE_EQ(*x.duplicated_decode_factor, 1.5);
  EXPECT_THAT(rep.ToText(), HasSubstr("exchange: 2 ranks"));
  EXPECT_THAT(rep.ToText(), HasSubstr("duplicated-decode factor 1.50"));
}

TEST(DataParallelReportTest, UnknownFramesOfOneProcessLeaveTheDecodeFactorNull) {
  const BottleneckReport rep =
      WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)}, false, std::nullopt);
  EXPECT_FALSE(rep.exchange->duplicated_decode_factor.has_value());
  EXPECT_TRUE(rep.ToJson()["exchange"]["duplicated_decode_factor"].is_null());
}

TEST(DataParallelReportTest, OnCudaTheHiddenShareAndExchangeTimeAreNotMeasured) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)}, true);
  EXPECT_FALSE(rep.exchange->hidden_pct.has_value());
  EXPECT_FALSE(rep.exchange->time_per_step_us.has_value());
  EXPECT_FALSE(rep.exchange->achieved_gb_per_s.has_value());
  EXPECT_THAT(rep.exchange->hidden_note, HasSubstr("not measured"));
  const nlohmann::ordered_json j = rep.ToJson();
  EXPECT_TRUE(j["exchange"]["hidden_pct"].is_null());
  EXPECT_THAT(rep.ToText(), HasSubstr("not measured behind compute"));
}

TEST(DataParallelReportTest, TheRankWithTheLeastTimeInTheExchangeIsTheStragglerAndLimitsTheJob) {
  // Rank 1 waits in the exchange only 5% of its time, rank 0 40%: rank 0 waits for rank 1,
  // whose decompress is its limit.
  const BottleneckReport rep =
      WorldReport({SynthRank(0, 40.0), SynthRank(1, 5.0, "input-bound", Stage::kDecompress)});
  EXPECT_EQ(rep.exchange->straggler.rank, 1);
  EXPECT_EQ(rep.exchange->straggler.limiting_stage, Stage::kDecompress);
  EXPECT_NEAR(rep.exchange->straggler.others_wait_pct, 35.0, 1e-9);
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  EXPECT_THAT(rep.sentence,
              HasSubstr("rank 1 is the straggler: its input pipeline (decompress) limits it "
                        "(input-bound); the others wait 35% of the step for it"));
  EXPECT_THAT(rep.sentence, HasSubstr("rank 1's own sentence"));
  // Not communication-bound: the straggler's own exchange is 5%.
  EXPECT_NEAR(rep.exchange->pure_pct, 5.0, 1e-9);
  // Swapped: rank 0 is the straggler; its own verdict stays, the clause is added.
  const BottleneckReport swapped = WorldReport({SynthRank(0, 5.0), SynthRank(1, 40.0)});
  EXPECT_EQ(swapped.exchange->straggler.rank, 0);
  EXPECT_EQ(swapped.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(swapped.sentence, HasSubstr("rank 0 is the straggler: its compute limits it"));
}

TEST(DataParallelReportTest, CommunicationBoundWhenTheStragglersOwnExchangePassesTheThreshold) {
  EXPECT_EQ(verdict_thresholds::kCommunicationBoundPct, 20.0);
  // Just below: the straggler spends 19.9% of its time in the exchange.
  const BottleneckReport below = WorldReport({SynthRank(0, 30.0), SynthRank(1, 19.9)});
  EXPECT_NE(below.verdict, VerdictClass::kCommunicationBound) << below.sentence;
  // Just above.
  const BottleneckReport above = WorldReport({SynthRank(0, 30.0), SynthRank(1, 20.1)});
  EXPECT_EQ(above.verdict, VerdictClass::kCommunicationBound) << above.sentence;
  EXPECT_THAT(above.sentence, HasSubstr("communication-bound: the gradient exchange takes 20% "
                                        "of training time even on rank 1"));
  EXPECT_THAT(above.sentence, HasSubstr("larger global --batch-size"));
  EXPECT_THAT(above.sentence, HasSubstr("NCCL"));
  const nlohmann::ordered_json j = above.ToJson();
  EXPECT_EQ(j["verdict"]["class"], "communication-bound");
  EXPECT_EQ(j["verdict"]["limiting_stage"], "exchange");
  EXPECT_EQ(j["exchange"]["communication_bound_pct"], 20.0);
  // A rank that waits a lot for a straggler is not communication cost: 60% on rank 0, 3% on
  // the straggler.
  const BottleneckReport waiting = WorldReport({SynthRank(0, 60.0), SynthRank(1, 3.0)});
  EXPECT_NE(waiting.verdict, VerdictClass::kCommunicationBound) << waiting.sentence;
}

TEST(DataParallelReportTest, RanksAreListedInTheTextAndTheJson) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)});
  const nlohmann::ordered_json j = rep.ToJson();
  ASSERT_EQ(j["ranks"].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(j["ranks"][r]["rank"], r);
    EXPECT_EQ(j["ranks"][r]["frames_decoded"], 300);
    EXPECT_EQ(j["ranks"][r]["limiting_stage"], "compute");
  }
  const std::string text = rep.ToText();
  EXPECT_THAT(text, HasSubstr("rank host"));
  EXPECT_THAT(text, HasSubstr("\n   1 host "));
  // The key order: the single-process keys, then exchange and ranks before the notes.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  ASSERT_GE(keys.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(keys.end() - 3, keys.end()),
            (std::vector<std::string>{"exchange", "ranks", "notes"}));
}

TEST(DataParallelReportTest, ASingleProcessReportIsUnchanged) {
  const RunRecord run = MakeRun(Synth{});
  const BottleneckReport plain = AnalyzeRun(run, nullptr, 2);
  BottleneckReport with_one_rank = plain;
  AddWorldFigures({SynthRank(0, 0.0)}, AllReduceCeiling{}, 40, &with_one_rank);
  EXPECT_FALSE(with_one_rank.exchange.has_value());
  EXPECT_EQ(with_one_rank.ToText(), plain.ToText());
  EXPECT_EQ(with_one_rank.ToJson(), plain.ToJson());
  EXPECT_FALSE(plain.ToJson().contains("exchange"));
  EXPECT_FALSE(plain.ToJson().contains("ranks"));
  EXPECT_EQ(plain.ToText().find("exchange"), std::string::npos);
}

TEST(DataParallelReportTest, JsonHasEveryDocumentedDataParallelFieldAndNoOther) {
  const BottleneckReport rep = WorldReport({SynthRank(0, 12.0), SynthRank(1, 10.0)});
  BottleneckReport full = rep;
  full.host_memory.lines.push_back({"train: pinned batch pool", 1});
  full.advice.push_back({AdviceSetting::kPoolSize, "8", "more batches"});
  Ceilings c;
  full.ceilings = c;
  full.epoch_split = EpochSplit{};
  const nlohmann::ordered_json j = full.ToJson();
  std::set<std::string> paths;
  Paths(j, "", &paths);
  std::ifstream doc(std::string(SLUICE_SOURCE_DIR) + "/docs/report-schema.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;  // every table: the single-process one and the data-parallel
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## Probe reports", 0) == 0) break;  // sluice.probe's, not a sluice run's
    // A remote dataset's network object (its own test: NetworkObjectIsTheDocumentedOne).
    if (line.rfind("| `network.", 0) == 0) continue;
    if (line.rfind("| `", 0) != 0) continue;
    documented.insert(line.substr(3, line.find('`', 3) - 3));
  }
  for (const std::string& p : paths) EXPECT_TRUE(documented.count(p)) << "undocumented: " << p;
  for (const std::string& p : documented) EXPECT_TRUE(paths.count(p)) << "not in the JSON: " << p;
}

TEST(DataParallelReportTest, RankSummariesRoundTripAndAMisplacedOneIsDataLoss) {
  RunRecord run = MakeRun(Synth{});
  run.rank = 1;
  run.world_size = 2;
  run.exchange = {kSteps, kSteps * kGradientBytes, 5'000'000, 1'000'000};
  run.pipeline.frames_decoded = 123;
  const BottleneckReport own = AnalyzeRun(run, nullptr, 2);
  const RankSummary s = SummarizeRank(run, own, "node7");
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.hostname, "node7");
  EXPECT_EQ(s.frames_decoded, 123u);
  EXPECT_EQ(s.limiting_stage, own.limiting_stage);
  EXPECT_NEAR(s.exchange_pct, 100.0 * 6e6 / (own.train_seconds * 1e9), 1e-9);
  EXPECT_DOUBLE_EQ(s.stage_busy_pct.of(Stage::kCompute), own.row(Stage::kCompute).busy_pct);
  const std::string wire = nlohmann::json(s).dump();
  auto parsed = ParseRankSummaries({nlohmann::json(SynthRank(0, 1.0)).dump(), wire});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(nlohmann::json((*parsed)[1]), nlohmann::json(s));
  auto misplaced = ParseRankSummaries({wire});
  EXPECT_EQ(misplaced.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(misplaced.status().message()), HasSubstr("says it is rank 1"));
  EXPECT_EQ(ParseRankSummaries({"{"}).status().code(), absl::StatusCode::kDataLoss);
}

TEST(DataParallelReportTest, TheAllReduceCeilingOfASingleProcessIsNotMeasured) {
  auto one = dist::SingleProcessCommunicator();
  auto c = MeasureAllReduceCeiling(one.get(), kGradientBytes);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->measured);
  EXPECT_THAT(c->note, HasSubstr("not measured"));
}

}  // namespace
}  // namespace sluice
