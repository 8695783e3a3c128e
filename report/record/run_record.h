// RunRecord: the plain record of one training run that every diagnostic reads (the bottleneck
// report, the Chrome trace, autotune). Whoever runs a job fills it in; the diagnostics never
// see the job runner, its options or its objects, only these values.
//
//   per-stage statistics of the data path (PipelineStats: read .. delivery)
//   + the consumer's side (ComputeStats: train steps, their time)
//   + the per-item spans for the timeline (when tracing)
//   + the memory figures and the device facts (backend name, CUDA or not)
//
// Times are steady-clock nanoseconds (pipeline/stage_stats.h NowNs), so pipeline spans and
// compute spans share one timeline.
// Thread safety: plain values.
#ifndef SLUICE_REPORT_RECORD_RUN_RECORD_H_
#define SLUICE_REPORT_RECORD_RUN_RECORD_H_

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/memory.h"
#include "pipeline/batch.h"
#include "pipeline/latency_histogram.h"
#include "pipeline/stage_stats.h"

namespace sluice {

// A coarse timeline of the consumer over the run, for the HTML report's wait-against-compute
// chart: per time bucket, the time compute ran and the time spent evaluating (host time);
// the rest of a bucket is time between steps (waiting for input, and the host's own work).
// Fixed size: once the run outgrows the buckets, neighbours are merged and the width doubles,
// so adding a span never allocates and costs O(buckets it touches).
struct ComputeTimeline {
  static constexpr int kBuckets = 256;
  static constexpr int64_t kFirstBucketNs = 1000000;  // 1 ms until the run outgrows 256 ms
  int64_t origin_ns = 0;  // the first span's start, or Open's (steady-clock ns); 0: empty
  int64_t bucket_ns = 0;  // width of a bucket; 0: empty
  int64_t end_ns = 0;     // the latest span's end
  std::array<int64_t, kBuckets> compute_ns{};
  std::array<int64_t, kBuckets> other_ns{};  // evaluation
  // Opened (Open): the origin is the start of the report's span; else the first step's start.
  bool from_span_start = false;

  // Opens the timeline at `origin_ns`, the start of the report's span, before any span is
  // added: the time from there to the first step is drawn as time between steps, as the
  // report counts it (the Python loader's pass starts when it asks for its first batch, and
  // a pipeline's start-up can be most of a short pass). No-op once the timeline has a span.
  void Open(int64_t origin_ns);
  void AddCompute(int64_t start, int64_t end) { Add(start, end, &compute_ns); }
  void AddOther(int64_t start, int64_t end) { Add(start, end, &other_ns); }
  // Buckets from the origin to end_ns (the last may be partly covered).
  int used() const;

 private:
  void Add(int64_t start, int64_t end, std::array<int64_t, kBuckets>* into);
  void Coarsen();  // merges neighbouring buckets: half as many, twice as wide
};

// The copy time hidden behind compute, measured online from the copies' and the steps' device
// spans on the host clock: each stream's spans arrive in time order (a copy when its batch is
// trained, a step when its events are timed, possibly many steps later), and a pair of spans
// is counted once, when the later of the two arrives. Compute spans that overlap each other are
// merged first, so no copy time is counted twice: the result equals CopyHiddenShare
// (trace_writer.h) over the same spans. Memory: the spans not yet passed by the other stream
// (bounded by the steps in flight; beyond kMaxPending the oldest are dropped as not hidden).
class CopyOverlap {
 public:
  static constexpr size_t kMaxPending = 4096;
  void AddCopy(int64_t start, int64_t end);
  // `first_of_epoch`: the epoch's first step; the copy time between the previous step's end
  // and its start is counted as start-up (startup_ns).
  void AddCompute(int64_t start, int64_t end, bool first_of_epoch = false);
  int64_t copy_ns() const { return copy_ns_; }
  int64_t hidden_ns() const { return hidden_ns_; }
  // Copy time before each epoch's first step while no step ran: the ring filling while compute
  // had nothing to run, which no setting can hide.
  int64_t startup_ns() const { return startup_ns_; }

 private:
  using Span = std::pair<int64_t, int64_t>;
  std::deque<Span> copies_;   // copies a later compute span may still overlap
  std::deque<Span> compute_;  // merged compute a later copy may still overlap
  int64_t compute_end_ = 0;   // the latest compute end seen: earlier time is merged
  int64_t copy_ns_ = 0;
  int64_t hidden_ns_ = 0;
  int64_t startup_ns_ = 0;
};

// One epoch's training rate, as the trainer measured it (EpochSummary).
struct EpochRate {
  uint64_t epoch = 0;
  uint64_t samples = 0;
  double seconds = 0;
  double samples_per_s = 0;
};

// The consumer side of the run, measured around every train step (engine/job/
// measured_backend.h): the time compute spent on steps, and the time it waited.
struct ComputeStats {
  uint64_t steps = 0;
  uint64_t samples = 0;
  // Time computing. CPU: host time inside Backend::TrainStep. Device backends (on_device):
  // device time of the steps, from timing events on the compute stream.
  int64_t busy_ns = 0;
  // Device backends: time the compute stream waited between steps (for data, or for the host
  // to enqueue). CPU: 0 (the consumer's wait is the pipeline's delivery wait_input).
  int64_t idle_ns = 0;
  int64_t enqueue_ns = 0;  // host time inside TrainStep (CPU: equals busy_ns)
  // Host threads that computed each step (Backend::compute_threads): the CPU backend splits a
  // step across them. Device backends: 1.
  int threads = 1;
  // Host backends: the CPU time of the steps, from the CPU clocks of the caller's thread and
  // the backend's team (Backend::helper_cpu_ns): less than busy_ns x threads when a team
  // thread was not scheduled for part of a step. 0: not measured (busy_ns x threads is used).
  int64_t cpu_ns = 0;
  // The steps are foreign code (the Python consumer): cpu_ns is its thread's CPU clock, and the
  // step may run threads of its own (torch's intra-op threads, OpenBLAS's) that it misses. The
  // resource model then takes the process's CPU time no stage accounts for as the step's when
  // that is more (BuildResourceModel).
  bool foreign_step = false;
  int64_t first_start_ns = 0;  // steady-clock ns (pipeline/stage_stats.h NowNs)
  int64_t last_end_ns = 0;
  std::string device;  // backend name
  bool is_cuda = false;
  bool on_device = false;    // steps run on a device's compute stream (CUDA or sim)
  ComputeTimeline timeline;  // the steps (and evaluations) over the run, coarsely
  // Device backends: the trained batches' copy time (their copy-stream spans) and the part of
  // it that overlapped a step's device time (CopyOverlap). 0, 0: no copies (the CPU backend).
  int64_t copy_ns = 0;
  int64_t copy_hidden_ns = 0;
  // Copy time before each epoch's first step while no step ran (CopyOverlap::startup_ns): the
  // ring filling while compute had nothing to run.
  int64_t startup_copy_ns = 0;
  // Device backends: the part of busy_ns that fell while the host was still enqueuing that
  // same step (MeasuredBackend). A device faster than the host's launches spends most of each
  // step's span there, waiting for the next launch: a launch-bound run reads busy, not idle.
  int64_t launch_gated_ns = 0;
  // Each step's time, as busy_ns counts it (host time in TrainStep, or its device span; the
  // Python consumer: the time between handing a batch out and asking for the next).
  LatencyHistogram step_latency;
};

// One span of compute per step, for the timeline (device backends: device time on the host
// clock).
struct ComputeSpan {
  uint64_t batch_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // On a device: when the host finished enqueuing the step (0: not known). The span before it
  // may be the device waiting for launches, so it hides no copy (CopyHiddenShare).
  int64_t enqueued_ns = 0;
};

// Who consumed the batches: sluice-train's job, or Python code through sluice.Loader. The
// report's advice names the settings that consumer has (flags, or Loader arguments).
enum class Consumer : uint8_t { kTrainJob, kPython };

// What the read stage fetched from object storage (storage/remote, docs/storage.md): the report's
// network view of a remote dataset. Counted over the report's span by sluice-train; since the
// process's first remote read by sluice.Loader.
struct NetworkRead {
  uint64_t requests = 0;  // HTTP attempts, retries included
  uint64_t retries = 0;
  uint64_t throttled = 0;          // 429 / 503 answers
  uint64_t server_errors = 0;      // other 5xx
  uint64_t connection_errors = 0;  // refused, reset, timed out
  uint64_t bytes = 0;              // received from servers
  int64_t max_in_flight = 0;
  double mean_in_flight = 0;  // time-weighted over the span counted
  // Of the time with a request in flight, the share, in [0, 1], with at least one response body
  // arriving: near 1 the bytes came as fast as the server or link allowed (bandwidth-bound),
  // near 0 the requests waited for their first byte (latency-bound).
  double receiving_fraction = 0;
  int64_t latency_p50_ns = 0;  // per successful request, send to last byte
  int64_t latency_p99_ns = 0;
  uint64_t cache_hits = 0;  // frames read from the local cache
  uint64_t cache_misses = 0;
  uint64_t cache_hit_bytes = 0;
  bool cache_on = false;
  std::string cache_writes_off;  // why the cache stopped writing (empty: it did not)
};

struct RunRecord {
  PipelineStats pipeline;                  // per-stage statistics of the data path
  ComputeStats compute;                    // the train steps
  std::vector<TraceSpan> trace;            // pipeline spans (when tracing)
  std::vector<ComputeSpan> compute_spans;  // one per step (when tracing)
  MemoryReport memory;                     // the backend's allocations, by tag
  MemoryFormula memory_formula;            // what the formula predicts for this model
  HostMemoryReport host_memory;            // what explains the process's peak resident memory
  std::string device;                      // backend name, e.g. "cpu (OpenBLAS, 1 thread)"
  uint64_t samples = 0;                    // trained in this process
  double train_seconds = 0;                // training time, without evaluation and checkpoints
  // Other processes' average use of this process's cores while it trained (common/cpu_load.h
  // OtherCoresBusy; nullopt: not measured). The resource model counts the cores left.
  std::optional<double> other_cores_busy;
  // This process's own average use of the cores over the same span (0: not measured).
  double process_cores_busy = 0;
  // The test split's evaluations (summed over epochs): corrupt frames skipped and their records.
  uint64_t test_skipped_frames = 0;
  uint64_t test_skipped_records = 0;
  std::vector<std::string> test_corrupt_frames;  // distinct messages, first 16
  std::string not_evaluated;  // why nothing was evaluated (empty: it was, or n/a)
  // The delays --inject-delay added, e.g. "decode 2000 us per image" (empty: none): the report
  // says so, since its figures and advice then describe an artificially slowed stage.
  std::string injected_delays;
  // The same delays as numbers: microseconds per item of each stage (its row's unit), for the
  // advice's prices (a planted decode delay does not shrink with the pixels).
  std::vector<std::pair<Stage, int64_t>> injected_delay_us;
  // Data-parallel runs: this process's rank, the number of ranks, and its gradient exchange.
  int rank = 0;
  int world_size = 1;
  dist::ExchangeStats exchange;
  std::vector<EpochRate> epochs;  // the epochs trained in this process, in order
  // The settings the advice starts from (report/advice/advice.h).
  Consumer consumer = Consumer::kTrainJob;
  H2DFormat h2d_format = H2DFormat::kF32;
  uint32_t read_ahead_frames = 0;
  uint32_t read_concurrency = 0;        // byte ranges a remote dataset fetches at once
  bool read_concurrency_tuned = false;  // chosen by the reader's tuning (no setting given)
  uint32_t batch_size = 0;              // samples per batch (0: not known)
  // A remote dataset's network figures (absent for local files).
  std::optional<NetworkRead> network;
};

// The record of a run from the data path's and the consumer's statistics: device is
// compute.device, samples is compute.samples and train_seconds is the span the report covers:
// from the first batch asked for (the consumer's first start, or the pipeline's start when
// earlier) to the consumer's last end. Everything else (memory, trace, ranks, evaluation) is
// left for the caller.
RunRecord RunRecordFromStats(PipelineStats pipeline, ComputeStats compute);

// The process's remote reads since it started or since storage/remote's ResetRemoteStats(), as
// the report shows them; nullopt when no remote file was opened.
std::optional<NetworkRead> CollectNetworkRead();

}  // namespace sluice

#endif  // SLUICE_REPORT_RECORD_RUN_RECORD_H_
