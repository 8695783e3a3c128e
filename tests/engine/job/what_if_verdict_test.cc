// The verdict and the what-if table never contradict each other: when the stage whose freeing
// measured the largest speedup is not the verdict's limiting stage, the measurement decides
// (it is an experiment) and the sentence says so.
#include <string>
#include <vector>

#include "engine/job/what_if.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// A report as AnalyzeRun leaves it: one row per stage, an input-bound verdict on decompress.
BottleneckReport InputBoundOnDecompress() {
  RunRecord run;
  BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  rep.verdict = VerdictClass::kInputBound;
  rep.limiting_stage = Stage::kDecompress;
  rep.sentence = "input-bound: compute waited 30% of training time; decompress is the limit";
  return rep;
}

std::vector<WhatIfRow> Table(double decompress, double compute) {
  return {{"normal", "", 100, 1.0},
          {"read", "", 101, 1.01},
          {"decompress", "", 100 * decompress, decompress},
          {"preprocess", "", 102, 1.02},
          {"h2d", "n/a: the CPU backend copies nothing", 0, 0},
          {"compute", "", 100 * compute, compute}};
}

TEST(WhatIfVerdictTest, AgreeingTableLeavesTheVerdictAlone) {
  BottleneckReport rep = InputBoundOnDecompress();
  const std::string before = rep.sentence;
  ReconcileVerdictWithWhatIf(Table(2.5, 1.3), RunRecord{}, &rep);
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  EXPECT_EQ(rep.sentence, before);
}

TEST(WhatIfVerdictTest, TheLargestMeasuredSpeedupDecidesTheLimitingStage) {
  BottleneckReport rep = InputBoundOnDecompress();
  ReconcileVerdictWithWhatIf(Table(1.63, 2.82), RunRecord{}, &rep);
  EXPECT_EQ(rep.verdict, VerdictClass::kComputeBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kCompute);
  EXPECT_THAT(rep.sentence, HasSubstr("compute-bound: decided by the what-if measurement: "
                                      "freeing compute gave 2.82x"));
  EXPECT_THAT(rep.sentence, HasSubstr("the attribution named decompress, whose freeing gave "
                                      "1.63x"));
  EXPECT_THAT(rep.sentence, HasSubstr("the attribution alone said: input-bound"));
  EXPECT_THAT(rep.sentence, ::testing::Not(HasSubstr("within 15%")));
}

// Decode is a part of preprocess: freeing preprocess (which frees decoding too) confirms a
// verdict naming decode; a decode row that measured the most names decode.
TEST(WhatIfVerdictTest, FreeingPreprocessConfirmsAVerdictNamingDecode) {
  BottleneckReport rep = InputBoundOnDecompress();
  rep.limiting_stage = Stage::kDecode;
  rep.sentence = "input-bound: ...; decoding takes 80% of its busy time";
  const std::string before = rep.sentence;
  std::vector<WhatIfRow> table = {{"normal", "", 100, 1.0},
                                  {"preprocess", "", 400, 4.0},
                                  {"compute", "", 110, 1.1},
                                  {"decode", "", 350, 3.5}};
  ReconcileVerdictWithWhatIf(table, RunRecord{}, &rep);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecode);
  EXPECT_EQ(rep.sentence, before);
  rep = InputBoundOnDecompress();  // the attribution named decompress; decoding measured the most
  table = {{"normal", "", 100, 1.0}, {"decompress", "", 110, 1.1}, {"decode", "", 350, 3.5}};
  ReconcileVerdictWithWhatIf(table, RunRecord{}, &rep);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecode);
  EXPECT_THAT(rep.sentence, HasSubstr("freeing decode gave 3.50x"));
}

TEST(WhatIfVerdictTest, SpeedupsWithinTheNoiseAreNamedAsACloseCall) {
  BottleneckReport rep = InputBoundOnDecompress();
  ReconcileVerdictWithWhatIf(Table(1.80, 1.95), RunRecord{}, &rep);
  EXPECT_EQ(rep.limiting_stage, Stage::kCompute);
  EXPECT_THAT(rep.sentence, HasSubstr("compute or decompress: within 15%"));
}

TEST(WhatIfVerdictTest, AComputeVerdictOverruledByAPipelineStageBecomesInputBound) {
  BottleneckReport rep = InputBoundOnDecompress();
  rep.verdict = VerdictClass::kComputeBound;
  rep.limiting_stage = Stage::kCompute;
  ReconcileVerdictWithWhatIf(Table(2.0, 1.1), RunRecord{}, &rep);
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
}

TEST(WhatIfVerdictTest, RowsThatWereNotRunDecideNothing) {
  BottleneckReport rep = InputBoundOnDecompress();
  std::vector<WhatIfRow> table = {{"normal", "", 100, 1.0},
                                  {"h2d", "n/a: the CPU backend copies nothing", 0, 0}};
  ReconcileVerdictWithWhatIf(table, RunRecord{}, &rep);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
}

}  // namespace
}  // namespace sluice
