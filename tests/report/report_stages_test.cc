// The stage table (report/stages.h): every stage has one row and its own name, which parses
// back; the flags' lists follow the rows' properties. The report's rows follow the data's flow,
// each reported stage has one row and a row number is found by looking the stage up; the report
// built from it has those rows, counts exactly the table's CPU stages in the CPU budget, holds each
// row to the table's ceiling, and advises only the settings the table lists for the stage.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "report/advice/advice.h"
#include "report/analysis/bottleneck_report.h"
#include "report/stages.h"
#include "tests/report/synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::MakeRun;
using synthetic_run::Synth;

// kStageTable is the one place a stage is named: every value of the enum has exactly one row,
// the names differ, and each parses back to its stage.
TEST(StageTable, EveryStageHasOneRowAndAnOwnNameThatParsesBack) {
  std::set<std::string> names;
  std::string all;
  for (int v = 0; v <= static_cast<int>(Stage::kTransforms); ++v) {
    const Stage s = static_cast<Stage>(v);
    int rows = 0;
    for (const StageInfo& info : kStageTable) rows += info.stage == s;
    EXPECT_EQ(rows, 1) << v;
    const std::string name(StageName(s));
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(*ParseStage(name), s) << name;
  }
  EXPECT_EQ(names.size(), kStageTable.size());
  for (const StageInfo& info : kStageTable)
    all += (all.empty() ? "" : ", ") + std::string(info.name);
  EXPECT_EQ(std::string(ParseStage("nope").status().message()),
            "unknown stage 'nope' (" + all + ")");
}

// A flag that names a stage accepts exactly the rows with its property, and lists them in
// table order; a stage without the property is refused with that list.
TEST(StageTable, FlagsAcceptExactlyTheRowsWithTheirProperty) {
  for (bool StageInfo::*property : {&StageInfo::what_if, &StageInfo::inject_delay}) {
    std::string listed;
    int with = 0, without = 0;
    for (const StageInfo& info : kStageTable) {
      absl::StatusOr<Stage> got = ParseStageWith(info.name, property);
      if (info.*property) {
        ++with;
        listed += (listed.empty() ? "" : ",") + std::string(info.name);
        ASSERT_TRUE(got.ok()) << info.name;
        EXPECT_EQ(*got, info.stage);
      } else {
        ++without;
        ASSERT_FALSE(got.ok()) << info.name;
        EXPECT_NE(
            std::string(got.status().message()).find("(" + StageNamesWith(property, ", ") + ")"),
            std::string::npos)
            << got.status();
      }
    }
    EXPECT_EQ(StageNamesWith(property, ","), listed);
    EXPECT_GT(with, 0);
    EXPECT_GT(without, 0);  // pinned_wait, delivery and loader are neither freed nor slowed
  }
  EXPECT_TRUE(ParseStageWith("transforms", &StageInfo::what_if).ok());
  EXPECT_FALSE(ParseStageWith("transforms", &StageInfo::inject_delay).ok());
}

TEST(ReportStagesTest, RowsFollowTheFlowWithComputeLast) {
  ASSERT_GE(kNumReportStages, 2);
  EXPECT_EQ(kReportStageTable.back().stage, Stage::kCompute);
  EXPECT_EQ(kReportStageTable.back().source, RowSource::kCompute);
  for (int i = 0; i + 1 < kNumReportStages; ++i) {
    const ReportStageInfo& info = kReportStageTable[i];
    SCOPED_TRACE(std::string(StageName(info.stage)));
    // Every row before compute is a pipeline stage, in the order the pipeline's enum lists its
    // stages (the data's flow); delivery is the consumer's side and has no row.
    EXPECT_LT(static_cast<int>(info.stage), kNumPipelineStages);
    EXPECT_NE(info.stage, Stage::kDelivery);
    EXPECT_NE(info.source, RowSource::kCompute);
    if (i > 0) {
      EXPECT_LT(kReportStageTable[i - 1].stage, info.stage);
    }
  }
}

TEST(ReportStagesTest, EachStageHasOneRowAndItsOwnName) {
  std::set<Stage> stages;
  std::set<std::string> names;
  for (const ReportStageInfo& info : kReportStageTable) {
    const std::string name(StageName(info.stage));
    EXPECT_TRUE(stages.insert(info.stage).second) << name << " has two rows";
    EXPECT_TRUE(names.insert(name).second) << name << " is named twice";
    EXPECT_NE(std::string(info.title), "");
    const std::string unit = info.unit;
    EXPECT_TRUE(unit == "frame" || unit == "image" || unit == "batch" || unit == "step")
        << StageName(info.stage) << ": " << unit;
  }
}

TEST(ReportStagesTest, RowLookupRoundTrips) {
  for (int i = 0; i < kNumReportStages; ++i) {
    const Stage s = kReportStageTable[i].stage;
    EXPECT_EQ(ReportRow(s), i) << StageName(s);
    EXPECT_EQ(FindReportStage(s), &kReportStageTable[i]) << StageName(s);
    EXPECT_EQ(kReportStages[i], s);
  }
  EXPECT_EQ(FindReportRow(Stage::kDelivery), -1);
  EXPECT_EQ(FindReportRow(Stage::kLoader), -1);
  EXPECT_EQ(FindReportStage(Stage::kDelivery), nullptr);
}

TEST(ReportStagesTest, TheReportHasTheTablesRowsInItsOrder) {
  const BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 4);
  ASSERT_EQ(rep.stages.size(), kReportStageTable.size());
  for (int i = 0; i < kNumReportStages; ++i) {
    EXPECT_EQ(rep.stages[i].stage, kReportStageTable[i].stage);
    EXPECT_EQ(&rep.row(kReportStageTable[i].stage), &rep.stages[i]);
  }
}

// Summed CPU time per sample of the rows the report counts as CPU work.
double CpuNsPerSample(const BottleneckReport& rep) {
  double ns = 0;
  for (const StageRow& r : rep.stages) {
    if (r.present && r.cpu_work) ns += r.cpu_ns_per_sample;
  }
  return ns;
}

TEST(ReportStagesTest, CpuWorkRowsAreExactlyTheOnesInTheCpuBudget) {
  Synth cpu;
  cpu.h2d_ns = 300;  // every row present
  cpu.decode_ns = 100;
  const BottleneckReport rep = AnalyzeRun(MakeRun(cpu), nullptr, 4);
  double table_ns = 0;
  for (const ReportStageInfo& info : kReportStageTable) {
    const StageRow& r = rep.row(info.stage);
    EXPECT_EQ(r.cpu_work, info.cpu_work) << StageName(info.stage);
    if (info.cpu_work) table_ns += r.cpu_ns_per_sample;
  }
  ASSERT_GT(table_ns, 0);
  EXPECT_DOUBLE_EQ(CpuNsPerSample(rep), table_ns);
  EXPECT_NEAR(rep.cpu_limit_samples_per_s, 4 * 1e9 / table_ns, 1e-6 * rep.cpu_limit_samples_per_s);

  // On a device the step is not host work: the host's enqueue time is counted instead.
  Synth device = cpu;
  device.cuda = true;
  const RunRecord run = MakeRun(device);
  const BottleneckReport on_device = AnalyzeRun(run, nullptr, 4);
  EXPECT_FALSE(on_device.row(Stage::kCompute).cpu_work);
  for (const ReportStageInfo& info : kReportStageTable) {
    if (info.stage != Stage::kCompute) {
      EXPECT_EQ(on_device.row(info.stage).cpu_work, info.cpu_work) << StageName(info.stage);
    }
  }
  const double enqueue_ns = static_cast<double>(run.compute.enqueue_ns) / run.compute.samples;
  EXPECT_NEAR(on_device.cpu_limit_samples_per_s, 4 * 1e9 / (CpuNsPerSample(on_device) + enqueue_ns),
              1e-6 * on_device.cpu_limit_samples_per_s);
}

TEST(ReportStagesTest, EachRowIsHeldToItsTablesCeiling) {
  Synth s;
  s.h2d_ns = 300;
  s.cuda = true;
  s.decode_ns = 100;
  Ceilings c;
  double rate = 1000;
  for (Ceiling* one : {&c.read, &c.decompress, &c.decode, &c.preprocess, &c.pinned_memcpy,
                       &c.h2d_pinned, &c.h2d_pageable, &c.compute}) {
    one->measured = true;
    one->samples_per_s = rate;
    rate *= 2;  // each ceiling its own figure, so a row held to the wrong one is seen
  }
  const int cores = 4;
  const BottleneckReport rep = AnalyzeRun(MakeRun(s), &c, cores);
  for (const ReportStageInfo& info : kReportStageTable) {
    const StageRow& r = rep.row(info.stage);
    SCOPED_TRACE(std::string(StageName(info.stage)));
    if (info.ceiling == nullptr) {
      EXPECT_FALSE(r.ceiling_samples_per_s.has_value());
      continue;
    }
    const int threads = info.ceiling_per_thread ? std::min(r.concurrency, cores) : 1;
    ASSERT_TRUE(r.ceiling_samples_per_s.has_value());
    EXPECT_DOUBLE_EQ(*r.ceiling_samples_per_s, (c.*info.ceiling).samples_per_s * threads);
  }
}

// A CUDA run on which every piece of advice applies: compressed f32 frames, a small pool and
// read-ahead, and a copy stream held back by the ring longer than it copied.
RunRecord EveryAdviceApplies() {
  Synth s;
  s.cuda = true;
  s.h2d_ns = 300;
  RunRecord run = MakeRun(s);
  run.h2d_format = H2DFormat::kF32;
  run.read_ahead_frames = 4;
  run.pipeline.ring_depth = 2;
  StageStats& h2d = run.pipeline.stages[static_cast<int>(Stage::kH2D)];
  h2d.wait_output_ns = 2 * h2d.busy_ns;
  StageStats& read = run.pipeline.stages[static_cast<int>(Stage::kRead)];
  read.bytes = run.pipeline.stages[static_cast<int>(Stage::kDecompress)].bytes / 2;
  return run;
}

// Across the two runs (copies held back by the ring; the link busy copying), each stage is
// advised exactly the settings its table row lists.
TEST(ReportStagesTest, AdviceNamesExactlyTheTablesSettingsForTheStage) {
  const RunRecord ring_full = EveryAdviceApplies();
  RunRecord link_busy = ring_full;
  link_busy.pipeline.stages[static_cast<int>(Stage::kH2D)].wait_output_ns = 0;
  for (const ReportStageInfo& info : kReportStageTable) {
    SCOPED_TRACE(std::string(StageName(info.stage)));
    std::set<AdviceSetting> listed;
    for (const auto& setting : info.advice) {
      if (setting) listed.insert(*setting);
    }
    std::set<AdviceSetting> given;
    for (const RunRecord* run : {&ring_full, static_cast<const RunRecord*>(&link_busy)}) {
      for (const Advice& a : AdviceFor(info.stage, /*threads=*/1, /*cores=*/4, *run,
                                       /*on_device=*/true, /*is_cuda=*/true)) {
        given.insert(a.setting);
      }
    }
    EXPECT_EQ(given, listed);
  }
}

}  // namespace
}  // namespace sluice
