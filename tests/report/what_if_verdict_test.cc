// The verdict and the what-if table never contradict each other: when the stage whose freeing
// measured the largest speedup is not the verdict's limiting stage, the measurement decides
// (it is an experiment) and the sentence says so (report/decide/what_if_verdict.cc, which
// Decide applies to the inferred verdict when it is given the rows).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/analysis/bottleneck_report.h"
#include "report/decide/decide.h"
#include "report/decide/internal/verdicts.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// An inferred verdict: input-bound on decompress.
Verdict InputBoundOnDecompress() {
  Verdict v;
  v.verdict = VerdictClass::kInputBound;
  v.limiting_stage = Stage::kDecompress;
  v.sentence = "input-bound: compute waited 30% of training time; decompress is the limit";
  return v;
}

// The inferred verdict reconciled with `rows` on an analysis with one row per stage.
Verdict Reconcile(const Verdict& inferred, const std::vector<WhatIfRow>& rows) {
  const RunRecord run;
  const BottleneckReport analysis = AnalyzeRun(run, nullptr, 2);
  return decide_internal::WhatIfVerdict(inferred, rows, analysis, &run);
}

std::vector<WhatIfRow> Table(double decompress, double compute) {
  return {{std::nullopt, "", 100, 1.0},
          {Stage::kRead, "", 101, 1.01},
          {Stage::kDecompress, "", 100 * decompress, decompress},
          {Stage::kPreprocess, "", 102, 1.02},
          {Stage::kH2D, "n/a: the CPU backend copies nothing", 0, 0},
          {Stage::kCompute, "", 100 * compute, compute}};
}

TEST(WhatIfVerdictTest, AgreeingTableLeavesTheVerdictAlone) {
  Verdict rep = InputBoundOnDecompress();
  const std::string before = rep.sentence;
  rep = Reconcile(rep, Table(2.5, 1.3));
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
  EXPECT_EQ(rep.sentence, before);
}

TEST(WhatIfVerdictTest, TheLargestMeasuredSpeedupDecidesTheLimitingStage) {
  Verdict rep = InputBoundOnDecompress();
  rep = Reconcile(rep, Table(1.63, 2.82));
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
  Verdict rep = InputBoundOnDecompress();
  rep.limiting_stage = Stage::kDecode;
  rep.sentence = "input-bound: ...; decoding takes 80% of its busy time";
  const std::string before = rep.sentence;
  std::vector<WhatIfRow> table = {{std::nullopt, "", 100, 1.0},
                                  {Stage::kPreprocess, "", 400, 4.0},
                                  {Stage::kCompute, "", 110, 1.1},
                                  {Stage::kDecode, "", 350, 3.5}};
  rep = Reconcile(rep, table);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecode);
  EXPECT_EQ(rep.sentence, before);
  rep = InputBoundOnDecompress();  // the attribution named decompress; decoding measured the most
  table = {{std::nullopt, "", 100, 1.0},
           {Stage::kDecompress, "", 110, 1.1},
           {Stage::kDecode, "", 350, 3.5}};
  rep = Reconcile(rep, table);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecode);
  EXPECT_THAT(rep.sentence, HasSubstr("freeing decode gave 3.50x"));
}

TEST(WhatIfVerdictTest, SpeedupsWithinTheNoiseAreNamedAsACloseCall) {
  Verdict rep = InputBoundOnDecompress();
  rep = Reconcile(rep, Table(1.80, 1.95));
  EXPECT_EQ(rep.limiting_stage, Stage::kCompute);
  EXPECT_THAT(rep.sentence, HasSubstr("compute or decompress: within 15%"));
}

TEST(WhatIfVerdictTest, AComputeVerdictOverruledByAPipelineStageBecomesInputBound) {
  Verdict rep = InputBoundOnDecompress();
  rep.verdict = VerdictClass::kComputeBound;
  rep.limiting_stage = Stage::kCompute;
  rep = Reconcile(rep, Table(2.0, 1.1));
  EXPECT_EQ(rep.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
}

// Decide applies the rows only to a run that trained: a run with no data keeps its verdict.
TEST(WhatIfVerdictTest, DecideKeepsANoDataVerdictWhateverTheRows) {
  const RunRecord run;
  const BottleneckReport analysis = AnalyzeRun(run, nullptr, 2);
  const std::vector<WhatIfRow> rows = Table(1.2, 3.0);
  const Verdict v = Decide({.analysis = &analysis, .run = &run, .what_if = &rows});
  EXPECT_EQ(v.verdict, VerdictClass::kNoData);
  EXPECT_EQ(v.sentence, analysis.sentence);
}

TEST(WhatIfVerdictTest, RowsThatWereNotRunDecideNothing) {
  Verdict rep = InputBoundOnDecompress();
  std::vector<WhatIfRow> table = {{std::nullopt, "", 100, 1.0},
                                  {Stage::kH2D, "n/a: the CPU backend copies nothing", 0, 0}};
  rep = Reconcile(rep, table);
  EXPECT_EQ(rep.limiting_stage, Stage::kDecompress);
}

}  // namespace
}  // namespace sluice
