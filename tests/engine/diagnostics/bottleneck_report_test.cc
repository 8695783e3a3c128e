// The bottleneck report's output: the text (table, verdict, memory) and the JSON, whose fields
// are exactly those docs/report-schema.md documents, in the documented order.
#include "engine/diagnostics/bottleneck_report.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/diagnostics/synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::MakeRun;
using synthetic_run::Paths;
using synthetic_run::Synth;
using ::testing::HasSubstr;

TEST(BottleneckReportTest, TextHasTableVerdictAndMemory) {
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  const std::string text = rep.ToText();
  for (const char* s : {"read", "decompress", "preprocess", "pinned_wait", "h2d", "compute",
                        "measured", "predicted", "verdict: ", "parameters", "optimizer"}) {
    EXPECT_THAT(text, HasSubstr(s));
  }
  EXPECT_THAT(text, HasSubstr(rep.sentence));
}

TEST(BottleneckReportTest, JsonHasEveryDocumentedFieldAndNoOther) {
  Ceilings c;
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), &c, 2);
  rep.host_memory.lines.push_back({"train: pinned batch pool", 1});  // so lines[] has its fields
  const nlohmann::ordered_json j = rep.ToJson();
  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_EQ(j["stages"].size(), static_cast<size_t>(kNumReportStages));
  std::set<std::string> paths;
  Paths(j, "", &paths);
  std::ifstream doc(std::string(SLUICE_SOURCE_DIR) + "/docs/report-schema.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;  // the first cell of each table row "| `path` | ..."
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## Data-parallel runs", 0) == 0) break;  // fields a single process lacks
    if (line.rfind("| `", 0) != 0) continue;
    documented.insert(line.substr(3, line.find('`', 3) - 3));
  }
  for (const std::string& p : paths) EXPECT_TRUE(documented.count(p)) << "undocumented: " << p;
  for (const std::string& p : documented) EXPECT_TRUE(paths.count(p)) << "not in the JSON: " << p;
  // It round-trips through text.
  EXPECT_EQ(nlohmann::ordered_json::parse(j.dump()), j);
}

TEST(BottleneckReportTest, RowsAreTheReportStagesInOrderNamedInTheJson) {
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  ASSERT_EQ(rep.stages.size(), kReportStages.size());
  const nlohmann::ordered_json j = rep.ToJson();
  const char* names[] = {"read", "decompress", "preprocess", "pinned_wait", "h2d", "compute"};
  for (int i = 0; i < kNumReportStages; ++i) {
    EXPECT_EQ(rep.stages[i].stage, kReportStages[i]);
    EXPECT_EQ(&rep.row(kReportStages[i]), &rep.stages[i]);
    EXPECT_EQ(j["stages"][i]["stage"], names[i]);
  }
  EXPECT_EQ(j["verdict"]["limiting_stage"], std::string(StageName(rep.limiting_stage)));
  EXPECT_EQ(j["verdict"]["class"], VerdictClassName(rep.verdict));
  // Key order is part of the output (ordered_json): the documented order.
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"schema",
                                            "device",
                                            "is_cuda",
                                            "on_device",
                                            "cores",
                                            "train_seconds",
                                            "samples",
                                            "steps",
                                            "measured_samples_per_s",
                                            "predicted_samples_per_s",
                                            "capacity_limit_samples_per_s",
                                            "cpu_limit_samples_per_s",
                                            "cpu_threads_busy",
                                            "cpu_saturated",
                                            "input_bound_pct",
                                            "host_wait_pct",
                                            "compute_host_pct",
                                            "verdict",
                                            "stages",
                                            "pipeline",
                                            "memory",
                                            "ceilings",
                                            "notes"}));
  EXPECT_EQ(j["stages"][0].begin().key(), "stage");
  EXPECT_TRUE(
      j["stages"][static_cast<int>(Stage::kPinnedWait)]["capacity_samples_per_s"].is_null());
}

}  // namespace
}  // namespace sluice
