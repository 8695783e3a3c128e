// The bottleneck report's output: the text (table, verdict, memory) and the JSON, whose fields
// are exactly those docs/report-schema.md documents, in the documented order.
#include "report/analysis/bottleneck_report.h"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/format.h"
#include "report/stages.h"
#include "tests/report/synthetic_run.h"

namespace sluice {
namespace {

using synthetic_run::MakeRun;
using synthetic_run::Paths;
using synthetic_run::Synth;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(BottleneckReportTest, TextHasTableVerdictAndMemory) {
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  const std::string text = rep.ToText();
  for (const StageInfo& info : kReportStageTable) EXPECT_THAT(text, HasSubstr(info.name));
  for (const char* s : {"measured", "predicted", "verdict: ", "parameters", "optimizer"}) {
    EXPECT_THAT(text, HasSubstr(s));
  }
  EXPECT_THAT(text, HasSubstr(rep.sentence));
}

TEST(BottleneckReportTest, JsonHasEveryDocumentedFieldAndNoOther) {
  Ceilings c;
  RunRecord run = MakeRun(Synth{});
  run.epochs = {{0, 100, 1, 100}, {1, 100, 1, 100}};  // so epoch_split has its fields
  run.pipeline.epoch_reads = {{0, 1, 1000, 1000}, {1, 1, 1000, 1000}};
  BottleneckReport rep = AnalyzeRun(run, &c, 2);
  rep.host_memory.lines.push_back({"train: pinned batch pool", 1});  // so lines[] has its fields
  rep.advice.push_back({AdviceSetting::kPoolSize, "8", "more batches"});  // and advice[]
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
    // A remote dataset's network object (its own test: NetworkObjectIsTheDocumentedOne).
    if (line.rfind("| `network.", 0) == 0) continue;
    if (line.rfind("| `", 0) != 0) continue;
    documented.insert(line.substr(3, line.find('`', 3) - 3));
  }
  for (const std::string& p : paths) EXPECT_TRUE(documented.count(p)) << "undocumented: " << p;
  for (const std::string& p : documented) EXPECT_TRUE(paths.count(p)) << "not in the JSON: " << p;
  // It round-trips through text.
  EXPECT_EQ(nlohmann::ordered_json::parse(j.dump()), j);
}

// A run that read a remote dataset (docs/storage.md) writes a `network` object before `notes`
// holding exactly the fields docs/report-schema.md's "Remote datasets" table documents, with
// the run's figures; a run of local files has none.
TEST(BottleneckReportTest, NetworkObjectIsTheDocumentedOne) {
  RunRecord run = MakeRun(Synth{});
  EXPECT_FALSE(AnalyzeRun(run, nullptr, 2).ToJson().contains("network"));
  NetworkRead n;
  n.requests = 300;
  n.retries = 6;
  n.throttled = 6;
  n.bytes = 31'900'000;
  n.max_in_flight = 17;
  n.mean_in_flight = 12.5;
  n.receiving_fraction = 0.25;
  n.latency_p50_ns = 21'000'000;
  n.latency_p99_ns = 48'000'000;
  n.cache_hits = 10;
  n.cache_misses = 225;
  n.cache_on = true;
  run.network = n;
  run.read_concurrency = 16;
  run.read_concurrency_tuned = true;
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  const nlohmann::ordered_json j = rep.ToJson();
  ASSERT_TRUE(j.contains("network"));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys[keys.size() - 2], "network");
  std::set<std::string> paths;
  Paths(j["network"], "network", &paths);
  std::ifstream doc(std::string(SLUICE_SOURCE_DIR) + "/docs/report-schema.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("| `network.", 0) == 0) {
      documented.insert(line.substr(3, line.find('`', 3) - 3));
    }
  }
  EXPECT_EQ(paths, documented);
  EXPECT_EQ(j["network"]["retries"], 6);
  EXPECT_EQ(j["network"]["mean_in_flight"], 12.5);
  EXPECT_EQ(j["network"]["read_concurrency"], 16);
  EXPECT_EQ(j["network"]["read_concurrency_tuned"], true);
  const std::string text = rep.ToText();
  EXPECT_THAT(text, HasSubstr("network: 31.9 MB fetched from the object store in 300 requests"));
  EXPECT_THAT(text,
              HasSubstr("12.5 in flight on average, at most 17 (read concurrency 16, tuned)"));
  EXPECT_THAT(text, HasSubstr("10 of 235 frames read from the local cache (4%)"));
  EXPECT_EQ(j["network"]["receiving_fraction"], 0.25);
  EXPECT_THAT(text, HasSubstr("a response was arriving 25% of the time one was in flight"));
  EXPECT_THAT(text, HasSubstr("in 300 requests (training and evaluation)"));
  // What the counts cover: no evaluation, no evaluation's fetches.
  run.not_evaluated = "evaluation is off (--evaluate=false)";
  EXPECT_THAT(AnalyzeRun(run, nullptr, 2).ToText(), HasSubstr("in 300 requests (training);"));
  // Nothing fetched (every frame from the cache): no arriving share to speak of.
  run.network->requests = 0;
  EXPECT_THAT(AnalyzeRun(run, nullptr, 2).ToText(), Not(HasSubstr("a response was arriving")));
}

// A read-bound remote run at a set concurrency of 2, its requests kept full: more in flight is
// advised when the requests waited for their first byte (latency), and not when the bytes
// arrived back to back (bandwidth: a response arriving 99% of the time one was in flight).
TEST(BottleneckReportTest, ReadConcurrencyIsAdvisedForLatencyAndNotForBandwidth) {
  Synth synth;
  synth.read_ns = 5000;  // the read limits: 200 k samples/s against compute's 2 M
  auto run_with = [&](double receiving) {
    RunRecord run = MakeRun(synth);
    StageStats& read = run.pipeline.stages[static_cast<int>(Stage::kRead)];
    read.cpu_ns = read.busy_ns / 50;  // the rest of its time off the CPU, waiting for bytes
    NetworkRead n;
    n.requests = 240;
    n.bytes = 27'000'000;
    n.max_in_flight = 4;
    n.mean_in_flight = 2.9;
    n.receiving_fraction = receiving;
    run.network = n;
    run.read_concurrency = 2;
    run.read_concurrency_tuned = false;
    return AnalyzeRun(run, nullptr, 2);
  };
  auto advised = [](const BottleneckReport& r) -> const Advice* {
    for (const Advice& a : r.advice) {
      if (a.setting == AdviceSetting::kReadConcurrency) return &a;
    }
    return nullptr;
  };
  const BottleneckReport latency = run_with(0.02);
  EXPECT_EQ(latency.limiting_stage, Stage::kRead) << latency.sentence;
  const Advice* more = advised(latency);
  ASSERT_NE(more, nullptr) << latency.sentence;
  EXPECT_EQ(more->value, "4");
  // Little's law on the mean in flight: 2.9 -> 4.9 requests, the waits 2.9/4.9 as long.
  EXPECT_GT(more->predicted_speedup, 1.5) << latency.sentence;
  EXPECT_LT(more->predicted_speedup, 1.75) << latency.sentence;

  const BottleneckReport bandwidth = run_with(0.99);
  EXPECT_EQ(bandwidth.limiting_stage, Stage::kRead) << bandwidth.sentence;
  EXPECT_EQ(advised(bandwidth), nullptr) << bandwidth.sentence;
  EXPECT_THAT(bandwidth.sentence, HasSubstr("--read-concurrency=4 1.0")) << bandwidth.sentence;
  auto bandwidth_note = [](const BottleneckReport& r) {
    for (const std::string& note : r.notes) {
      if (note.find("the remote reads were bandwidth-bound") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(bandwidth_note(bandwidth));
  EXPECT_FALSE(bandwidth_note(latency));
}

// Item latency: each row's p50, p99 and max in the JSON (ns, as recorded) and under the text's
// table; null on a row without items.
TEST(BottleneckReportTest, ItemLatencyPerRow) {
  const RunRecord run = MakeRun(Synth{});
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  const nlohmann::ordered_json j = rep.ToJson();
  const nlohmann::ordered_json read = j["stages"][ReportRow(Stage::kRead)];
  EXPECT_EQ(read["latency_p50_ns"].get<int64_t>(), run.pipeline[Stage::kRead].latency.p50_ns);
  EXPECT_EQ(read["latency_p99_ns"].get<int64_t>(), run.pipeline[Stage::kRead].latency.p99_ns);
  EXPECT_EQ(read["latency_max_ns"].get<int64_t>(), run.pipeline[Stage::kRead].latency.max_ns);
  const nlohmann::ordered_json compute = j["stages"][ReportRow(Stage::kCompute)];
  EXPECT_EQ(compute["latency_max_ns"].get<int64_t>(), run.compute.step_latency.max_ns());
  EXPECT_TRUE(j["stages"][ReportRow(Stage::kH2D)]["latency_p50_ns"].is_null());
  const std::string text = rep.ToText();
  EXPECT_THAT(text, HasSubstr("item latency (each item's wall time):"));
  EXPECT_THAT(text,
              HasSubstr(absl::StrCat("  read        ", FormatItemLatency(rep.row(Stage::kRead)))));
  EXPECT_THAT(FormatItemLatency(rep.row(Stage::kCompute)), HasSubstr(" per step"));
  EXPECT_THAT(text, Not(HasSubstr("  h2d         p50")));
}

TEST(BottleneckReportTest, DurationsHaveThreeFigures) {
  EXPECT_EQ(FormatDuration(850), "850 ns");
  EXPECT_EQ(FormatDuration(1234), "1.23 us");
  EXPECT_EQ(FormatDuration(12345), "12.3 us");
  EXPECT_EQ(FormatDuration(139300), "139 us");
  EXPECT_EQ(FormatDuration(4'560'000), "4.56 ms");
  EXPECT_EQ(FormatDuration(1'230'000'000), "1.23 s");
}

// The copy-hidden share: null and "not applicable" without copies; on a device run the share
// of copy time, and under 90% a note that names the start-up part and the compute stream's wait.
TEST(BottleneckReportTest, CopyHiddenShareIsStatedForDeviceRunsOnly) {
  BottleneckReport cpu = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  EXPECT_FALSE(cpu.copy_hidden_pct.has_value());
  EXPECT_TRUE(cpu.ToJson()["copy_hidden_pct"].is_null());
  EXPECT_NE(cpu.ToText().find("hidden behind compute: not applicable"), std::string::npos);
  Synth device;
  device.cuda = true;
  device.h2d_ns = 50;
  RunRecord run = MakeRun(device);
  run.compute.copy_ns = 1000;
  run.compute.copy_hidden_ns = 800;
  run.compute.startup_copy_ns = 150;
  BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  ASSERT_TRUE(rep.copy_hidden_pct.has_value());
  EXPECT_DOUBLE_EQ(*rep.copy_hidden_pct, 80.0);
  EXPECT_DOUBLE_EQ(rep.ToJson()["copy_startup_pct"].get<double>(), 15.0);
  EXPECT_NE(rep.ToText().find("copies (h2d) hidden behind compute: 80% of copy time (15% ran"),
            std::string::npos)
      << rep.ToText();
  bool noted = false;
  for (const std::string& n : rep.notes) noted |= n.find("15.0% ran before an epoch") != n.npos;
  EXPECT_TRUE(noted) << rep.ToText();
  run.compute.copy_hidden_ns = 950;  // at the goal: no note
  rep = AnalyzeRun(run, nullptr, 2);
  for (const std::string& n : rep.notes) EXPECT_EQ(n.find("h2d:"), std::string::npos) << n;
}

TEST(BottleneckReportTest, RowsAreTheReportStagesInOrderNamedInTheJson) {
  BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  ASSERT_EQ(rep.stages.size(), kReportStages.size());
  const nlohmann::ordered_json j = rep.ToJson();
  for (int i = 0; i < kNumReportStages; ++i) {
    EXPECT_EQ(rep.stages[i].stage, kReportStages[i]);
    EXPECT_EQ(&rep.row(kReportStages[i]), &rep.stages[i]);
    EXPECT_EQ(j["stages"][i]["stage"], kReportStageTable[i].name);
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
                                            "launch_gated_pct",
                                            "copy_hidden_pct",
                                            "copy_startup_pct",
                                            "epoch_split",
                                            "verdict",
                                            "stages",
                                            "model",
                                            "pipeline",
                                            "memory",
                                            "ceilings",
                                            "notes"}));
  EXPECT_EQ(j["stages"][0].begin().key(), "stage");
  EXPECT_TRUE(j["stages"][ReportRow(Stage::kPinnedWait)]["capacity_samples_per_s"].is_null());
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Runs whose raw figures once read as shares over 100: batches waiting for pinned buffers
// summed over batches, a stage that worked before the span opened, a consumer that waited
// longer than the span (the span's start taken too late), and a device run.
std::vector<Synth> OverfullRuns() {
  std::vector<Synth> runs(5);
  runs[0].pinned_wait_pct = 3587.7;
  runs[1].train_ns_per_sample = 20;  // every stage busier than the span
  runs[2].wait_pct = 313;
  runs[3].cuda = true;
  runs[3].h2d_ns = 300;
  runs[3].wait_pct = 1588;
  runs[4].compute_threads = 8;
  runs[4].compute_cpu_ns = 4000;
  return runs;
}

void ExpectSharesInRange(const nlohmann::ordered_json& j, const std::string& path) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string key = it.key();
      const std::string p = path + "." + key;
      if (key.size() > 4 && key.compare(key.size() - 4, 4, "_pct") == 0 && it->is_number()) {
        EXPECT_GE(it->get<double>(), 0.0) << p;
        EXPECT_LE(it->get<double>(), 100.0) << p;
      }
      ExpectSharesInRange(*it, p);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) ExpectSharesInRange(j[i], path + "[]");
  }
}

TEST(BottleneckReportShares, EveryPctFieldOfTheJsonIsAShareInZeroToHundred) {
  for (const Synth& s : OverfullRuns()) {
    const BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 2);
    ExpectSharesInRange(rep.ToJson(), "");
    for (const StageRow& r : rep.stages) {
      // The three shares add up for the graph stages (the rows read from their StageStats).
      if (!r.present || FindReportStage(r.stage)->source != RowSource::kGraphStage) continue;
      EXPECT_NEAR(r.busy_pct + r.wait_input_pct + r.wait_output_pct, 100.0, 1e-6)
          << StageName(r.stage);
    }
  }
}

// The value in `line` under the header column that ends at `end` (right-aligned, `width`).
double ColumnValue(const std::string& line, size_t end, size_t width) {
  if (line.size() < end) return 0;
  const std::string cell = line.substr(end - width, width);
  return cell.find_first_of("0123456789") == std::string::npos ? 0 : std::stod(cell);
}

TEST(BottleneckReportShares, TheTextShowsNoPercentageOverHundred) {
  for (const Synth& s : OverfullRuns()) {
    const std::string text = AnalyzeRun(MakeRun(s), nullptr, 2).ToText();
    std::istringstream lines(text);
    std::string line, header;
    while (std::getline(lines, line)) {
      if (line.rfind("stage ", 0) == 0) {
        header = line;
        continue;
      }
      // Every "N%" in a sentence or note.
      for (size_t pos = line.find('%'); pos != std::string::npos; pos = line.find('%', pos + 1)) {
        size_t b = pos;
        while (b > 0 && (std::isdigit(line[b - 1]) || line[b - 1] == '.')) --b;
        if (b < pos) {
          EXPECT_LE(std::stod(line.substr(b, pos - b)), 100.0) << line;
        }
      }
      if (header.empty() || line.find("(not in this run)") != std::string::npos) continue;
      bool row = false;
      for (Stage st : kReportStages)
        row = row || line.rfind(std::string(StageName(st)) + " ", 0) == 0;
      if (!row) continue;
      // The share columns and their widths in ToText's format.
      const std::pair<const char*, size_t> columns[] = {
          {"busy%", 6}, {"wait-in", 7}, {"wait-out", 8}, {" wait%", 6}};
      for (const auto& [col, width] : columns) {
        const size_t end = header.rfind(col) + std::string(col).size();
        EXPECT_LE(ColumnValue(line, end, width), 100.0) << col << ": " << line;
      }
    }
    EXPECT_FALSE(header.empty());
    if (s.pinned_wait_pct > 100) {
      EXPECT_THAT(text, HasSubstr("batches waited for one on average"));
    }
  }
}

TEST(BottleneckReportShares, PinnedWaitSummedOverBatchesIsShownAsBatchesWaiting) {
  Synth s;
  s.pinned_wait_pct = 350;  // 3.5 batches waited at once on average
  const BottleneckReport rep = AnalyzeRun(MakeRun(s), nullptr, 2);
  EXPECT_NEAR(rep.row(Stage::kPinnedWait).batches_waiting_avg, 3.5, 1e-6);
  EXPECT_LE(rep.row(Stage::kPinnedWait).busy_pct, 100.0);
}

// The preprocess row's split between the chain's ops: each op's sampled time scaled to all
// the stage's samples, over its busy time; the rest is outside the chain; together 100.
TEST(BottleneckReportTest, PreprocessSplitsItsBusyTimeBetweenTheChainsOps) {
  RunRecord run = MakeRun(Synth{.preprocess_ns = 200});  // busy: 200 ns x kSamples
  const uint64_t timed = synthetic_run::kSamples / 16;
  run.pipeline.chain_ops = {{"RandomCrop(32, padding=4)", static_cast<int64_t>(120 * timed)},
                            {"RandomHorizontalFlip(p=0.5)", static_cast<int64_t>(18 * timed)},
                            {"Normalize(mean=[0.5], std=[0.25])", static_cast<int64_t>(2 * timed)}};
  run.pipeline.chain_timed_samples = timed;
  const BottleneckReport rep = AnalyzeRun(run, nullptr, 2);
  const StageRow& pre = rep.row(Stage::kPreprocess);
  ASSERT_TRUE(pre.ops.has_value());
  ASSERT_EQ(pre.ops->size(), 3u);
  EXPECT_EQ((*pre.ops)[0].op, "RandomCrop(32, padding=4)");
  EXPECT_NEAR((*pre.ops)[0].share_pct, 60, 1e-6);
  EXPECT_NEAR((*pre.ops)[1].share_pct, 9, 1e-6);
  EXPECT_NEAR((*pre.ops)[2].share_pct, 1, 1e-6);
  EXPECT_NEAR(*pre.outside_chain_pct, 30, 1e-6);
  EXPECT_THAT(rep.ToText(), HasSubstr("  chain: 60% RandomCrop(32, padding=4), 9% "
                                      "RandomHorizontalFlip(p=0.5), 1% Normalize(mean=[0.5], "
                                      "std=[0.25]), 30% outside the chain"));
  EXPECT_THAT(rep.ToText(), HasSubstr("sampled 1 in 16 samples"));
  const nlohmann::ordered_json row = rep.ToJson()["stages"][ReportRow(Stage::kPreprocess)];
  ASSERT_TRUE(row["ops"].is_array());
  EXPECT_EQ(row["ops"][0]["op"], "RandomCrop(32, padding=4)");
  EXPECT_NEAR(row["ops"][0]["share_pct"].get<double>(), 60, 1e-6);
  EXPECT_NEAR(row["outside_chain_pct"].get<double>(), 30, 1e-6);
  // The other rows have none.
  EXPECT_TRUE(rep.ToJson()["stages"][ReportRow(Stage::kRead)]["ops"].is_null());
}

// Sampling noise can put the scaled estimate above the busy time: the shares are scaled down
// to 100 together, each in [0, 100], and nothing is left outside the chain.
TEST(BottleneckReportTest, ChainSharesStayWithinTheBusyTime) {
  RunRecord run = MakeRun(Synth{.preprocess_ns = 200});
  const uint64_t timed = synthetic_run::kSamples / 16;
  run.pipeline.chain_ops = {{"A()", static_cast<int64_t>(300 * timed)},
                            {"B()", static_cast<int64_t>(100 * timed)}};
  run.pipeline.chain_timed_samples = timed;
  const StageRow pre = AnalyzeRun(run, nullptr, 2).row(Stage::kPreprocess);
  ASSERT_TRUE(pre.ops.has_value());
  EXPECT_NEAR((*pre.ops)[0].share_pct, 75, 1e-6);
  EXPECT_NEAR((*pre.ops)[1].share_pct, 25, 1e-6);
  EXPECT_NEAR(*pre.outside_chain_pct, 0, 1e-6);
}

TEST(BottleneckReportTest, NoChainMeansNoOps) {
  const BottleneckReport rep = AnalyzeRun(MakeRun(Synth{}), nullptr, 2);
  EXPECT_FALSE(rep.row(Stage::kPreprocess).ops.has_value());
  EXPECT_THAT(rep.ToText(), ::testing::Not(HasSubstr("chain:")));
  const nlohmann::ordered_json row = rep.ToJson()["stages"][ReportRow(Stage::kPreprocess)];
  EXPECT_TRUE(row["ops"].is_null());
  EXPECT_TRUE(row["outside_chain_pct"].is_null());
}

}  // namespace
}  // namespace sluice
