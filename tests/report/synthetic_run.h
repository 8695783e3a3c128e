// The set-up shared by the bottleneck report's tests: Synth describes a synthetic run (each
// stage's busy time per sample, its concurrency, a CPU or device run, forced waits), MakeRun
// turns it into the RunRecord that AnalyzeRun reads, and Paths lists every field path of a
// report's JSON for the tests that hold the JSON to docs/report-schema.md.
#ifndef SLUICE_TESTS_REPORT_SYNTHETIC_RUN_H_
#define SLUICE_TESTS_REPORT_SYNTHETIC_RUN_H_

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include "report/analysis/bottleneck_report.h"

namespace sluice::synthetic_run {

// A synthetic run: per-sample busy ns of each stage (busy summed over its threads), the
// concurrency of decompress and preprocess, and how the run went. Training time is what the
// slowest stage allows (plus 2%), and compute waited for the rest.
struct Synth {
  double read_ns = 100, decompress_ns = 200, preprocess_ns = 200, compute_ns = 500, h2d_ns = 0;
  // Decompress's measured thread CPU time per sample (StageStats::cpu_ns; 0: not measured, its
  // busy time counts as CPU).
  double decompress_cpu_ns = 0;
  int decompress_conc = 2, preprocess_conc = 2;
  bool cuda = false;                // a device run (CUDA): compute timed by events on its stream
  double wait_pct = -1;             // >= 0: force compute's wait (% of training time)
  double host_wait_pct = -1;        // device runs: the host's wait in Next(); < 0: wait_pct
  double enqueue_ns = -1;           // device runs: host enqueue per sample; < 0: a tenth of compute
  double train_ns_per_sample = -1;  // > 0: force the training time
  double pinned_wait_pct = 0;
  int compute_threads = 1;    // CPU runs: the threads each step is split across
  double compute_cpu_ns = 0;  // CPU runs: measured CPU time per sample of compute (0: none)
  // Encoded images: the decode's busy ns per sample, a part of preprocess_ns (0: no decode).
  double decode_ns = 0;
};

inline constexpr uint64_t kSamples = 60000;
inline constexpr int64_t kT0 = 1'000'000'000;

inline StageStats Graph(Stage s, int conc, double ns_per_sample, double train_ns, uint64_t items) {
  StageStats st;
  st.stage = s;
  st.concurrency = conc;
  st.items = items;
  st.samples = kSamples;
  st.bytes = kSamples * 784;
  st.busy_ns = static_cast<int64_t>(ns_per_sample * kSamples);
  st.first_start_ns = kT0;
  st.last_end_ns = kT0 + static_cast<int64_t>(train_ns);
  const int64_t idle = std::max<int64_t>(0, static_cast<int64_t>(conc * train_ns) - st.busy_ns);
  st.wait_input_ns = idle / 2;
  st.wait_output_ns = idle - idle / 2;
  st.queue_high_water = 3;
  // Each item's time: the mean item's, with a tail of twice and three times it.
  const int64_t mean = items > 0 ? st.busy_ns / static_cast<int64_t>(items) : 0;
  st.latency = {items, mean, 2 * mean, 3 * mean};
  return st;
}

inline RunRecord MakeRun(const Synth& s) {
  double per_sample = std::max({s.read_ns, s.decompress_ns / s.decompress_conc,
                                s.preprocess_ns / s.preprocess_conc, s.compute_ns, s.h2d_ns});
  if (s.train_ns_per_sample > 0) per_sample = s.train_ns_per_sample;
  const double train_ns = per_sample * 1.02 * kSamples;
  RunRecord r;
  r.train_seconds = train_ns / 1e9;
  r.samples = kSamples;
  PipelineStats& p = r.pipeline;
  for (int i = 0; i < kNumPipelineStages; ++i) p.stages[i].stage = static_cast<Stage>(i);
  const auto at = [&p](Stage st) -> StageStats& { return p.stages[static_cast<int>(st)]; };
  at(Stage::kRead) = Graph(Stage::kRead, 1, s.read_ns, train_ns, kSamples / 256);
  at(Stage::kDecompress) =
      Graph(Stage::kDecompress, s.decompress_conc, s.decompress_ns, train_ns, kSamples / 256);
  at(Stage::kDecompress).cpu_ns = static_cast<int64_t>(s.decompress_cpu_ns * kSamples);
  at(Stage::kPreprocess) =
      Graph(Stage::kPreprocess, s.preprocess_conc, s.preprocess_ns, train_ns, kSamples / 32);
  if (s.decode_ns > 0) {  // per image, inside preprocess: no waits of its own
    at(Stage::kDecode) = Graph(Stage::kDecode, s.preprocess_conc, s.decode_ns, train_ns, kSamples);
    at(Stage::kDecode).wait_input_ns = 0;
    at(Stage::kDecode).wait_output_ns = 0;
    at(Stage::kDecode).bytes = kSamples * 150000;
  }
  if (s.h2d_ns > 0) at(Stage::kH2D) = Graph(Stage::kH2D, 1, s.h2d_ns, train_ns, kSamples / 32);
  at(Stage::kPinnedWait).items = 10;
  at(Stage::kPinnedWait).busy_ns = static_cast<int64_t>(s.pinned_wait_pct / 100 * train_ns);
  at(Stage::kPinnedWait).queue_high_water = 4;
  p.pool_buffers = 4;
  const double compute_busy = s.compute_ns * kSamples;
  const double wait =
      s.wait_pct >= 0 ? s.wait_pct / 100 * train_ns : std::max(0.0, train_ns - compute_busy) * 0.95;
  at(Stage::kDelivery).stage = Stage::kDelivery;
  at(Stage::kDelivery).wait_input_ns = static_cast<int64_t>(
      s.cuda && s.host_wait_pct >= 0 ? s.host_wait_pct / 100 * train_ns : wait);
  at(Stage::kDelivery).queue_high_water = 2;
  ComputeStats& c = r.compute;
  c.steps = kSamples / 32;
  c.samples = kSamples;
  c.busy_ns = static_cast<int64_t>(compute_busy);
  c.first_start_ns = kT0;
  c.last_end_ns = kT0 + static_cast<int64_t>(train_ns);
  c.device = s.cuda ? "cuda:0 (test)" : "cpu (test)";
  c.is_cuda = s.cuda;
  c.on_device = s.cuda;
  c.threads = s.compute_threads;
  c.cpu_ns = static_cast<int64_t>(s.compute_cpu_ns * kSamples);
  for (uint64_t i = 0; i < c.steps; ++i) c.step_latency.Add(c.busy_ns / (kSamples / 32));
  if (s.cuda) {
    c.idle_ns = static_cast<int64_t>(wait);
    c.enqueue_ns =
        static_cast<int64_t>((s.enqueue_ns >= 0 ? s.enqueue_ns : s.compute_ns / 10) * kSamples);
  } else {
    c.enqueue_ns = c.busy_ns;
  }
  r.memory.current_bytes[static_cast<int>(MemoryTag::kParameters)] = 407080;
  r.memory.total_current = 407080;
  r.memory_formula.parameters = 407080;
  r.memory_formula.gradients = 407080;
  return r;
}

// Every field path of the JSON, arrays as "name[]".
inline void Paths(const nlohmann::ordered_json& j, const std::string& prefix,
                  std::set<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string p = prefix.empty() ? it.key() : prefix + "." + it.key();
      out->insert(p);
      Paths(it.value(), p, out);
    }
  } else if (j.is_array() && !j.empty() && j.front().is_object()) {
    Paths(j.front(), prefix + "[]", out);
  }
}

}  // namespace sluice::synthetic_run

#endif  // SLUICE_TESTS_REPORT_SYNTHETIC_RUN_H_
