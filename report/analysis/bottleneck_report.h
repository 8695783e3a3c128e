// BottleneckReport: where a training run lost its time, stage by stage, and which stage limits
// it. docs/bottleneck.md explains every figure and how to act on each verdict;
// docs/report-schema.md documents the JSON.
//
//   RunRecord run = ...;                              // e.g. RunTrainJob(...)->run
//   BottleneckReport report = AnalyzeRun(run, &ceilings_or_null, /*cores=*/2);
//   std::cout << report.ToText();                     // table + verdict + memory
//   json = report.ToJson();                           // --report-json
//
// AnalyzeRun reads only what a real run records (pipeline StageStats, ComputeStats, the
// training time, the memory figures); it never looks at the trace, so the report is the same
// with and without --trace.
// Thread safety: plain values.
#ifndef SLUICE_REPORT_ANALYSIS_BOTTLENECK_REPORT_H_
#define SLUICE_REPORT_ANALYSIS_BOTTLENECK_REPORT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/memory.h"
#include "nlohmann/json.hpp"
#include "pipeline/stage_stats.h"
#include "report/advice/advice.h"
#include "report/model/resource_model.h"
#include "report/record/ceiling_figures.h"
#include "report/record/data_parallel.h"
#include "report/record/run_record.h"
#include "report/stages.h"

namespace sluice {

// The rows of the report are kReportStageTable's (report_stages.h), in its order; a row's name
// is StageName(stage).

// Verdict classes (docs/bottleneck.md, "Verdict").
enum class VerdictClass {
  kInputBound,          // compute waited > 20% of training time
  kPartlyInputBound,    // 5-20%
  kComputeBound,        // < 5%
  kLaunchBound,         // < 5% on CUDA, host time in TrainStep (kernel launches) dominates
  kCpuBound,            // >= 5% wait and the cores are saturated by stage CPU time
  kNoData,              // nothing was trained
  kCommunicationBound,  // data parallel: the exchange's own cost is too large (decide/thresholds.h)
};
const char* VerdictClassName(VerdictClass v);  // "input-bound", "partly-input-bound", ...
// VerdictClassName's inverse; nullopt for an unknown name.
std::optional<VerdictClass> ParseVerdictClass(absl::string_view name);

// One op of the run's transform chain and its share of the preprocess stage's busy time
// (docs/bottleneck.md, "The transform chain").
struct ChainOpShare {
  std::string op;        // the op's identity, e.g. "RandomCrop(32, padding=4)"
  double share_pct = 0;  // in [0, 100]
};

struct StageRow {
  Stage stage = Stage::kRead;
  bool present = false;   // the run had this stage (h2d only on CUDA)
  bool cpu_work = false;  // counted in the CPU budget (read, decompress, preprocess, compute)
  int concurrency = 1;    // threads; compute on the CPU: the threads each step runs on
  uint64_t items = 0;     // frames (read, decompress), batches (others)
  uint64_t samples = 0;
  uint64_t bytes = 0;
  // decode: the images' whole sizes at the output's channels (PipelineStats::
  // decode_stored_bytes), against `bytes`, the part decoded; 0 for the other rows.
  uint64_t stored_bytes = 0;
  double items_per_s = 0;    // over the training time
  double samples_per_s = 0;  // over the training time
  // The share of `samples` in items that ended while the trainer was outside the span (its
  // evaluation, the gap between epochs, a checkpoint; StageStats::samples_outside_span): work
  // done ahead, which the span did not have to wait for. The resource model counts only the
  // rest against the span. In [0, 100]; 0 for the rows the pipeline does not record.
  double outside_span_pct = 0;
  int64_t busy_ns = 0;  // pinned_wait: time batches waited for a pinned buffer, summed
  // Shares of concurrency x the report's span (train_seconds; a graph stage that worked
  // outside it: its own window), each in [0, 100]; busy + wait_input + wait_output = 100 for
  // the graph stages. pinned_wait: the share of the span during which a batch waited for a
  // buffer.
  double busy_pct = 0;
  double wait_input_pct = 0;
  double wait_output_pct = 0;
  double batches_waiting_avg = 0;  // pinned_wait: batches waiting for a buffer, on average
  uint64_t queue_high_water = 0;
  // samples / (busy / concurrency): what the stage could do if nothing else limited it
  // (compute: samples / busy, busy being the wall time of its steps).
  std::optional<double> capacity_samples_per_s;
  // CPU time per sample: busy_ns / samples for the graph stages (busy is summed over their
  // threads); compute on the CPU: its threads' measured CPU time (ComputeStats::cpu_ns) /
  // samples, else busy_ns x threads / samples.
  double cpu_ns_per_sample = 0;
  // Cores the stage kept busy on average over the training time (cpu_work stages).
  double cores_busy = 0;
  // capacity / (per-thread ceiling x min(concurrency, cores)), when a ceiling was measured.
  std::optional<double> ceiling_samples_per_s;
  std::optional<double> pct_of_ceiling;
  double attributed_wait_pct = 0;  // share of the consumer's wait attributed here (estimate)
  // preprocess with a transform chain whose ops were timed: each op's share of busy_ns, in
  // chain order, and the rest (gathering, the conversions around the chain, any injected
  // delay), together 100. nullopt on the other rows and without a chain.
  std::optional<std::vector<ChainOpShare>> ops;
  std::optional<double> outside_chain_pct;
  // Item latency (pipeline/latency_histogram.h): each item's wall time, its median, 99th
  // percentile and max, in ns (docs/bottleneck.md, "Item latency"). Items as `items` counts
  // them; compute: steps; pinned_wait: the waits of batches that waited. nullopt: no items.
  std::optional<int64_t> latency_p50_ns;
  std::optional<int64_t> latency_p99_ns;
  std::optional<int64_t> latency_max_ns;
};

// The run's first epoch against its later ones (docs/bottleneck.md, "Cold and warm epochs"):
// a first epoch that reads from disk while the later ones read the page cache is slower for a
// reason the whole-run table averages away. Present when this process trained two or more
// epochs and the pipeline recorded their reads.
struct EpochSplit {
  uint64_t first_epoch = 0;  // as the trainer counts (from 0)
  uint64_t later_epochs = 0;
  double first_samples_per_s = 0;
  double later_samples_per_s = 0;  // the later epochs' samples over their seconds
  double first_seconds = 0;        // the first epoch's training time
  double later_seconds = 0;        // per later epoch, on average
  double first_read_seconds = 0;   // the reader's busy time on the epoch's frames
  double later_read_seconds = 0;   // per later epoch, on average
  double first_read_mb_per_s = 0;  // stored MB over the reader's busy seconds (0: no reads)
  double later_read_mb_per_s = 0;
  // The first epoch trained more than kEpochsDifferFraction slower than the later ones.
  bool differ = false;
  // The pinned pool holds at least half an epoch's batches: the later epochs started with
  // batches built during the first (and its evaluation), so the epochs' rates do not compare
  // and no cause is claimed.
  bool ran_ahead = false;
  // ... and its reads were at least kColdReadFactor slower per byte (it read from disk, or a
  // colder cache, and the later epochs did not) and their extra time is at least
  // kColdExplainsFraction of the epoch's extra time: the disk explains the slower epoch.
  bool cold = false;
};
inline constexpr double kEpochsDifferFraction = 0.15;
inline constexpr double kColdReadFactor = 2.0;
inline constexpr double kColdExplainsFraction = 0.5;

struct BottleneckReport {
  std::vector<StageRow> stages;  // kNumReportStages rows, in kReportStages order
  std::string device;            // backend name
  bool is_cuda = false;
  bool on_device = false;  // compute ran on a device stream (CUDA or sim), timed by events
  int cores = 0;
  double train_seconds = 0;
  uint64_t samples = 0;  // trained
  uint64_t steps = 0;
  double measured_samples_per_s = 0;        // samples / train_seconds
  double predicted_samples_per_s = 0;       // the resource model's binding bound (model.binding)
  double capacity_limit_samples_per_s = 0;  // min over stages of capacity (wall busy times)
  double cpu_limit_samples_per_s = 0;       // cores / sum over CPU stages of CPU ns per sample
  double cpu_threads_busy = 0;              // sum of CPU stages' busy / training time
  bool cpu_saturated = false;               // cpu_threads_busy >= 0.9 x cores
  // Compute waited for its input, % of training time: on a device, the compute stream's idle
  // time between steps (from events); on the CPU, the consumer's wait in Next().
  double input_bound_pct = 0;
  double host_wait_pct = 0;     // the host (consumer) blocked in Next(): delivery.wait_input
  double compute_host_pct = 0;  // host time inside TrainStep (on a device: enqueue)
  // On a device: the steps' device spans while the host was still enqueuing that same step,
  // % of training time (ComputeStats::launch_gated_ns); part of the compute row's busy_pct.
  double launch_gated_pct = 0;
  VerdictClass verdict = VerdictClass::kNoData;
  Stage limiting_stage = Stage::kCompute;
  std::string sentence;  // the one-sentence verdict with a suggestion
  // The suggestion as concrete changes (a setting and its value), in the order the sentence
  // gives them; empty when no setting of the run would relieve the limit.
  std::vector<Advice> advice;
  Consumer consumer = Consumer::kTrainJob;  // whose settings the advice names
  std::vector<std::string> notes;           // caveats (dropped trace spans, skipped frames, ...)
  PipelineStats pipeline;                   // copied for the pool/ring figures
  MemoryReport memory;
  MemoryFormula memory_formula;
  HostMemoryReport host_memory;
  std::optional<Ceilings> ceilings;
  // Data-parallel runs only (AddWorldFigures; absent from text and JSON in a single process).
  std::optional<ExchangeFigures> exchange;
  std::vector<RankSummary> ranks;  // index = rank
  // A remote dataset: what the read stage fetched (RunRecord::network), and the read
  // concurrency it fetched with. Absent from text and JSON for local files.
  std::optional<NetworkRead> network;
  // sluice-train's network counts include its evaluation's fetches; false when nothing was
  // evaluated (RunRecord::not_evaluated).
  bool network_includes_evaluation = true;
  uint32_t read_concurrency = 0;
  bool read_concurrency_tuned = false;
  // Device runs: the share of the trained batches' copy time (copy-stream device time) that ran
  // while a step computed, in [0, 100] (ComputeStats::copy_hidden_ns / copy_ns; it equals the
  // trace's otherData.copy_hidden_share x 100). nullopt: no copies (the CPU backend, or a
  // consumer whose steps were not timed).
  std::optional<double> copy_hidden_pct;
  // Device runs: the share of copy time that ran before an epoch's first step while no step
  // ran (ComputeStats::startup_copy_ns): no setting can hide it. nullopt with copy_hidden_pct.
  std::optional<double> copy_startup_pct;
  std::optional<EpochSplit> epoch_split;
  // The resource model of this run (report/model/resource_model.h, docs/bottleneck.md "The
  // resource model"): its bounds for the run's own allocation, and the share of each modelled
  // stage's wall busy time its threads waited for a core.
  Prediction model;
  std::vector<std::pair<Stage, double>> starved_pct;
  // The model itself, for the advice's prices (report/advice/price.h); absent for a probed
  // loader.
  std::optional<ResourceModel> resource_model;
  // Other processes' average use of the run's cores (RunRecord::other_cores_busy; nullopt: not
  // measured) and the cores the model counted: `cores` less that use, at least 0.1.
  std::optional<double> other_cores_busy;
  double process_cores_busy = 0;  // RunRecord::process_cores_busy
  double model_cores = 0;
  // The model's rate with each what-if stage free (table order; the stages it can free), for
  // the what-if runs to test.
  std::vector<std::pair<Stage, double>> if_free;

  const StageRow& row(Stage s) const { return stages[ReportRow(s)]; }
  // A compact table, the verdict sentence, and the memory figures.
  std::string ToText() const;
  // Every figure, as documented in docs/report-schema.md (schema "sluice.bottleneck_report/1").
  nlohmann::ordered_json ToJson() const;
};

inline constexpr char kReportSchema[] = "sluice.bottleneck_report/1";

// The run's samples, training span and rate exactly as AnalyzeRun counts them, without the rest
// of the analysis (the resource model, the verdict, the advice's prices): what the Python
// loader needs at each pass's end, inside the user's loop.
struct MeasuredRate {
  uint64_t samples = 0;
  double seconds = 0;
  double samples_per_s = 0;
};
MeasuredRate MeasureRate(const RunRecord& run);

// Analyzes a finished run. `ceilings` may be null (no "% of ceiling" figures). `cores` is the
// number of CPU cores the run could use (std::thread::hardware_concurrency() for sluice-train);
// values < 1 are treated as 1.
BottleneckReport AnalyzeRun(const RunRecord& run, const Ceilings* ceilings, int cores);

// Data-parallel runs. SummarizeRank: this rank's figures for rank 0 (`own` is AnalyzeRun of
// `run`). AddWorldFigures (rank 0): adds the exchange section and the ranks table to rank 0's
// report, names the straggler, and decides the job's verdict: communication-bound when the
// straggler's exchange time passes kCommunicationBoundPct of its training time, else the
// straggler's own verdict when the others wait for it (docs/bottleneck.md, "Data-parallel
// runs"). `frames_one_process`: the frames one process would decode for this run (nullopt:
// unknown); the duplicated-decode factor is the ranks' frames_decoded summed over it.
RankSummary SummarizeRank(const RunRecord& run, const BottleneckReport& own,
                          const std::string& hostname);
void AddWorldFigures(const std::vector<RankSummary>& ranks, const AllReduceCeiling& ceiling,
                     std::optional<uint64_t> frames_one_process, BottleneckReport* rep);

}  // namespace sluice

#endif  // SLUICE_REPORT_ANALYSIS_BOTTLENECK_REPORT_H_
