// The report of a loader measured from outside (sluice.probe): its two rows, its accounting
// (shares of the span, the measured rate), the verdict and the replay's what-if, and its JSON
// against docs/report-schema.md.
#include "report/analysis/loader_probe.h"

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "report/format.h"
#include "tests/report/synthetic_run.h"

namespace sluice {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// 100 steps of 64 samples: 3 s blocked in next(), 1 s of steps (a loader-bound run at
// 1600 samples/s whose step alone does 6400), and a replay of 50 steps at 6400 samples/s.
LoaderProbeRecord LoaderBound() {
  LoaderProbeRecord r;
  r.loader = "torch.utils.data.DataLoader (num_workers=0)";
  r.passes = 1;
  r.steps = 100;
  r.samples = 6400;
  r.wait_ns = 3'000'000'000;
  r.step_ns = 1'000'000'000;
  r.max_wait_ns = 200'000'000;
  r.replay_steps = 50;
  r.replay_samples = 3200;
  r.replay_span_ns = 500'000'000;
  r.replay_batch = "last";
  return r;
}

TEST(LoaderProbeTest, LoaderBoundRunNamesTheLoaderAndThePredictedSpeedup) {
  const ProbeReport p = *AnalyzeLoaderProbe(LoaderBound(), 2);
  EXPECT_EQ(p.report.verdict, VerdictClass::kInputBound);
  EXPECT_EQ(p.report.limiting_stage, Stage::kLoader);
  EXPECT_DOUBLE_EQ(p.probe.free_data_samples_per_s, 6400);
  EXPECT_EQ(p.probe.free_data_source, "replay");
  EXPECT_DOUBLE_EQ(p.probe.speedup, 4.0);
  EXPECT_DOUBLE_EQ(p.report.predicted_samples_per_s, 6400);
  EXPECT_THAT(p.report.sentence, HasSubstr("input-bound: compute waited 75% of the time in next() "
                                           "of torch.utils.data.DataLoader (num_workers=0)"));
  EXPECT_THAT(p.report.sentence,
              HasSubstr("replacing the loader could reach up to 6.4 k samples/s (4.00x, the "
                        "free-data bound)"));
  EXPECT_THAT(p.report.sentence, HasSubstr("probe.measure_switch(loader)"));
  EXPECT_FALSE(p.probe.switch_samples_per_s.has_value());
  EXPECT_THAT(p.ToText(), HasSubstr(p.report.sentence));
}

// The switch measured (Probe.measure_switch): the resource model of sluice's pipeline and the
// step on the same 2 cores. The step alone does 6400 samples/s at 156.25 us of CPU per sample,
// sluice alone 12800 at 250 us (its 4 threads, to use 3.2 cores alone): their summed CPU time
// allows 2 cores / 406.25 us, and the step, on one thread, gets less than its core while
// sluice's threads want the cores too: it binds below that, which is the cores' sharing.
TEST(LoaderProbeTest, SwitchIsPredictedFromSluiceAloneAndTheStepOnTheSameCores) {
  LoaderProbeRecord r = LoaderBound();
  r.replay_cpu_ns = 500'000'000;  // 3200 replayed samples
  r.sluice_samples = 6400;
  r.sluice_span_ns = 500'000'000;
  r.sluice_cpu_ns = 1'600'000'000;
  const ProbeReport p = *AnalyzeLoaderProbe(r, 2);
  ASSERT_TRUE(p.probe.switch_samples_per_s.has_value());
  EXPECT_LT(*p.probe.switch_samples_per_s, 2e9 / (156'250 + 250'000));
  EXPECT_GT(*p.probe.switch_samples_per_s, 0.9 * 2e9 / (156'250 + 250'000));
  EXPECT_EQ(p.probe.switch_binding, "shared-cpu");
  EXPECT_NEAR(*p.probe.switch_sluice_samples_per_s, 12'800, 1e-9);
  EXPECT_NEAR(*p.probe.switch_step_cpu_us_per_sample, 156.25, 1e-9);
  EXPECT_NEAR(*p.probe.switch_speedup, *p.probe.switch_samples_per_s / 1600, 1e-9);
  EXPECT_DOUBLE_EQ(p.report.predicted_samples_per_s, *p.probe.switch_samples_per_s);
  EXPECT_THAT(p.report.sentence,
              HasSubstr(absl::StrFormat("switching to sluice.Loader is predicted at %s (%.2fx, the "
                                        "prediction: the two share the cores",
                                        FormatRate(*p.probe.switch_samples_per_s),
                                        *p.probe.switch_speedup)));
  // On 8 cores the step itself binds: its rate with free data.
  const ProbeReport wide = *AnalyzeLoaderProbe(r, 8);
  EXPECT_EQ(wide.probe.switch_binding, "step");
  EXPECT_NEAR(*wide.probe.switch_samples_per_s, 6400, 1e-6);
  // A switch measured without a replay has no step cost: no prediction.
  r.replay_steps = r.replay_samples = 0;
  r.replay_span_ns = r.replay_cpu_ns = 0;
  EXPECT_FALSE(AnalyzeLoaderProbe(r, 2)->probe.switch_samples_per_s.has_value());
}

// How the step ran in the replay: the cores it kept busy and its time in the kernel. A team of
// threads (1.6 cores busy) and a step faulting its memory in (25% in the kernel) each get a
// note; a steady one-thread step gets neither, nor does kernel time without a fault per step.
TEST(LoaderProbeTest, ATeamOfThreadsOrAStepInTheKernelIsNoted) {
  LoaderProbeRecord r = LoaderBound();  // a replay of 0.5 s
  r.replay_cpu_ns = 490'000'000;
  r.replay_sys_ns = 4'900'000;
  r.replay_page_faults = 50;
  const ProbeReport steady = *AnalyzeLoaderProbe(r, 2);
  EXPECT_NEAR(*steady.probe.replay_cores_busy, 0.98, 1e-9);
  EXPECT_NEAR(*steady.probe.replay_kernel_pct, 1.0, 1e-9);
  EXPECT_NEAR(*steady.probe.replay_page_faults_per_step, 1.0, 1e-9);
  for (const std::string& n : steady.report.notes) {
    EXPECT_THAT(n, Not(HasSubstr("your step")));
  }
  r.replay_cpu_ns = 800'000'000;
  r.replay_sys_ns = 200'000'000;
  r.replay_page_faults = 800;
  const ProbeReport team = *AnalyzeLoaderProbe(r, 2);
  EXPECT_THAT(team.report.notes,
              Contains(HasSubstr("your step kept 1.6 of the 2 cores busy with free data")));
  EXPECT_THAT(team.report.notes, Contains(HasSubstr("OPENBLAS_NUM_THREADS=1")));
  EXPECT_THAT(team.report.notes,
              Contains(HasSubstr("25% of its CPU time in the kernel (16 page faults per step)")));
  // Kernel time without a page fault on every step is not the allocator's: no such note.
  r.replay_page_faults = 40;
  const ProbeReport unfaulted = *AnalyzeLoaderProbe(r, 2);
  EXPECT_NEAR(*unfaulted.probe.replay_kernel_pct, 25.0, 1e-9);
  for (const std::string& n : unfaulted.report.notes) {
    EXPECT_THAT(n, Not(HasSubstr("in the kernel")));
  }
  // Kernel time beyond the CPU time is refused, naming the field.
  r.replay_sys_ns = r.replay_cpu_ns + 1;
  EXPECT_THAT(AnalyzeLoaderProbe(r, 2).status().message(), HasSubstr("replay_sys_ns"));
}

TEST(LoaderProbeTest, SharesOfTheSpanAddUpTo100AndTheRateIsSamplesOverTheSpan) {
  const ProbeReport p = *AnalyzeLoaderProbe(LoaderBound(), 2);
  ASSERT_EQ(p.report.stages.size(), 2u);
  EXPECT_EQ(p.report.stages[0].stage, Stage::kLoader);
  EXPECT_EQ(p.report.stages[1].stage, Stage::kCompute);
  EXPECT_DOUBLE_EQ(p.report.stages[0].busy_pct + p.report.stages[1].busy_pct, 100.0);
  EXPECT_DOUBLE_EQ(p.report.train_seconds, 4.0);
  EXPECT_DOUBLE_EQ(p.report.measured_samples_per_s, 1600);
  EXPECT_DOUBLE_EQ(p.report.input_bound_pct, 75);
  EXPECT_DOUBLE_EQ(*p.report.stages[1].capacity_samples_per_s, 6400);
  EXPECT_FALSE(p.report.stages[0].capacity_samples_per_s.has_value());
  EXPECT_EQ(p.probe.span_ns, 4'000'000'000);
  EXPECT_DOUBLE_EQ(p.probe.mean_wait_us, 30'000);
  EXPECT_DOUBLE_EQ(p.probe.mean_step_us, 10'000);
}

TEST(LoaderProbeTest, ShortWaitIsComputeBound) {
  LoaderProbeRecord r = LoaderBound();
  r.wait_ns = 20'000'000;  // 2% of the span
  r.step_ns = 980'000'000;
  r.max_wait_ns = 10'000'000;
  r.replay_span_ns = 480'000'000;
  const ProbeReport p = *AnalyzeLoaderProbe(r, 2);
  EXPECT_EQ(p.report.verdict, VerdictClass::kComputeBound);
  EXPECT_EQ(p.report.limiting_stage, Stage::kCompute);
  EXPECT_THAT(p.report.sentence, HasSubstr("compute-bound: compute waited 2%"));
}

TEST(LoaderProbeTest, ReplayThatIsNoFasterOverridesTheWait) {
  LoaderProbeRecord r = LoaderBound();
  r.wait_ns = 100'000'000;  // 10%: partly input-bound by the thresholds alone
  r.step_ns = 900'000'000;
  r.max_wait_ns = 1'000'000;
  r.replay_span_ns = 500'000'000;  // 6400 samples/s: what the run already did
  const ProbeReport p = *AnalyzeLoaderProbe(r, 2);
  EXPECT_DOUBLE_EQ(p.probe.speedup, 1.0);
  EXPECT_EQ(p.report.verdict, VerdictClass::kComputeBound);
  EXPECT_THAT(p.report.sentence, HasSubstr("a faster loader would not speed it up"));
}

TEST(LoaderProbeTest, WithoutReplayTheStepTimeGivesTheFreeDataRate) {
  LoaderProbeRecord r = LoaderBound();
  r.replay_steps = 0;
  r.replay_samples = 0;
  r.replay_span_ns = 0;
  const ProbeReport p = *AnalyzeLoaderProbe(r, 2);
  EXPECT_EQ(p.probe.free_data_source, "step_time");
  EXPECT_DOUBLE_EQ(p.probe.free_data_samples_per_s, 6400);  // 6400 samples / 1 s of steps
  EXPECT_FALSE(p.probe.replay_steps.has_value());
  EXPECT_THAT(p.report.sentence, HasSubstr("probe.replay() measures it"));
}

TEST(LoaderProbeTest, NoStepsIsNoData) {
  const ProbeReport p = *AnalyzeLoaderProbe(LoaderProbeRecord{}, 2);
  EXPECT_EQ(p.report.verdict, VerdictClass::kNoData);
  EXPECT_EQ(p.report.measured_samples_per_s, 0);
}

TEST(LoaderProbeTest, NegativeTimeOrReplayWithoutSpanIsInvalidArgumentNamingTheField) {
  LoaderProbeRecord r = LoaderBound();
  r.wait_ns = -1;
  absl::StatusOr<ProbeReport> p = AnalyzeLoaderProbe(r, 2);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("wait_ns"));
  r = LoaderBound();
  r.replay_span_ns = 0;
  p = AnalyzeLoaderProbe(r, 2);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("replay_span_ns"));
}

// The loader's name is the caller's text: an ANSI escape and a megabyte of it used to reach
// the text twice (its first line and the verdict), raw and whole (2 MB). The text escapes it
// and both the text and the JSON bound it; the JSON's writer escapes it there.
TEST(LoaderProbeTest, AHostileLoaderNameIsEscapedAndBoundedInTheTextAndTheJson) {
  LoaderProbeRecord r = LoaderBound();
  r.loader = "\x1b[2J" + std::string(1'000'000, 'N');
  const ProbeReport p = *AnalyzeLoaderProbe(r, 2);
  const ProbeReport plain = *AnalyzeLoaderProbe(LoaderBound(), 2);
  const std::string text = p.ToText();
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_LT(text.size(), plain.ToText().size() + 2000);
  EXPECT_THAT(text, HasSubstr("probe report: \\x1b[2JNNN"));
  EXPECT_THAT(text, HasSubstr("... (1000004 bytes)"));
  EXPECT_THAT(p.report.sentence, HasSubstr("next() of \\x1b[2JNNN"));
  const std::string json = p.ToJson().dump();
  EXPECT_EQ(json.find('\x1b'), std::string::npos);
  EXPECT_LT(json.size(), plain.ToJson().dump().size() + 5000);
  const std::string loader = p.ToJson()["probe"]["loader"];
  EXPECT_EQ(loader, "\x1b[2J" + std::string(196, 'N') + "... (1000004 bytes)");
  EXPECT_THAT(json, HasSubstr("\\u001b[2JNNN"));
}

// The JSON: the single-process fields of docs/report-schema.md, in their order, with "probe"
// (its own table, "Probe reports") before "notes", and the rows named loader and compute.
TEST(LoaderProbeTest, JsonIsTheReportSchemaPlusTheDocumentedProbeObject) {
  const nlohmann::ordered_json j = AnalyzeLoaderProbe(LoaderBound(), 2)->ToJson();
  std::set<std::string> paths;
  synthetic_run::Paths(j, "", &paths);
  std::ifstream doc(std::string(SLUICE_SOURCE_DIR) + "/docs/report-schema.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;
  bool single_process = true, probe = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## Data-parallel runs", 0) == 0) single_process = false;
    if (line.rfind("## Probe reports", 0) == 0) probe = true;
    // A remote dataset's network object (its own test: NetworkObjectIsTheDocumentedOne).
    if (line.rfind("| `network.", 0) == 0) continue;
    if (line.rfind("| `", 0) != 0 || !(single_process || probe)) continue;
    const std::string path = line.substr(3, line.find('`', 3) - 3);
    // A probe report has no ceilings, no epoch split, no host-memory lines, no advice of
    // sluice's settings and no resource model bounds (null and empty).
    if (path.rfind("ceilings.", 0) == 0 || path.rfind("epoch_split.", 0) == 0 ||
        path.rfind("memory.host.lines[].", 0) == 0 || path.rfind("verdict.advice[].", 0) == 0 ||
        path.rfind("model.bounds[].", 0) == 0 || path.rfind("model.starved[].", 0) == 0 ||
        path.rfind("model.if_free[].", 0) == 0) {
      continue;
    }
    documented.insert(path);
  }
  for (const std::string& p : paths) EXPECT_TRUE(documented.count(p)) << "undocumented: " << p;
  for (const std::string& p : documented) EXPECT_TRUE(paths.count(p)) << "not in the JSON: " << p;
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  ASSERT_GE(keys.size(), 3u);
  EXPECT_EQ(keys[keys.size() - 2], "probe");
  EXPECT_EQ(keys.back(), "notes");
  EXPECT_EQ(j["stages"][0]["stage"], "loader");
  EXPECT_EQ(j["stages"][1]["stage"], "compute");
  EXPECT_EQ(j["verdict"]["limiting_stage"], "loader");
  EXPECT_EQ(j["probe"]["free_data_source"], "replay");
}

}  // namespace
}  // namespace sluice
