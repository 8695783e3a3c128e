// Stage statistics of a Pipeline: what each stage did, how long it was busy, and how long it
// waited on its input and on its output. The bottleneck report reads these.
//
// Times are nanoseconds. Timestamps are std::chrono::steady_clock nanoseconds since the clock's
// epoch (the same clock CUDA event times are aligned to), so spans of different threads and
// of several pipelines share one timeline.
//
// Thread safety: StageStats, PipelineStats and TraceSpan are plain values (snapshots).
#ifndef SLUICE_PIPELINE_STAGE_STATS_H_
#define SLUICE_PIPELINE_STAGE_STATS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/latency_histogram.h"

namespace sluice {

// The stages of the data path, in flow order. kPinnedWait is not a node of the graph: it is
// the time batches whose frames were ready spent waiting for a free pinned buffer.
// kDelivery is the consumer's side: items are batches handed out, wait_input is the time the
// consumer blocked in Next(), busy is the time it held leases.
// kCompute is the training step that consumes the batches: not a pipeline stage (the first
// kNumPipelineStages values are; PipelineStats has no kCompute entry), but a row of the
// bottleneck report (report/analysis/bottleneck_report.h) and a target of --inject-delay.
// kLoader is another library's loader measured from outside (sluice.probe,
// report/analysis/loader_probe.h): a row of a probe's report only.
// kDecode is not a node of the graph either: it is the decoding of encoded images (the chain's
// DecodeImage op), which runs inside the preprocess stage on its threads; it is recorded on its
// own, per image (items and samples are images, bytes the decoded pixels), and its busy time is
// also part of preprocess's.
// kTransforms is the transform chain's ops, also a part of preprocess (the report splits
// preprocess's row between them): a what-if target only, without a row of its own.
enum class Stage : uint8_t {
  kRead = 0,
  kDecompress,
  kDecode,
  kPreprocess,
  kPinnedWait,
  kH2D,
  kDelivery,
  kCompute,
  kLoader,
  kTransforms,
};
inline constexpr int kNumPipelineStages = 7;  // kRead .. kDelivery

// What each stage is called, what a what-if run or --inject-delay may do to it and how the
// bottleneck report reads it: report/stages.h's kStageTable, once, keyed by this enum. Adding a
// stage: a value above, a row there, and its measurement (docs/architecture.md, "Where to
// change what").

struct StageStats {
  Stage stage = Stage::kRead;
  int concurrency = 1;   // how many items it may process at once
  uint64_t items = 0;    // frames (read, decompress) or batches (the others)
  uint64_t samples = 0;  // samples in those items
  // Those of them in items that ended while the consumer was outside the span its report
  // covers (Pipeline::SetConsumerInSpan: a trainer's evaluation, the gap between epochs, a
  // checkpoint): work done ahead, before the span that needs it. Graph stages and decode.
  uint64_t samples_outside_span = 0;
  uint64_t bytes = 0;   // bytes produced (stored bytes for read, raw for decompress,
                        // batch bytes for preprocess and h2d)
  int64_t busy_ns = 0;  // summed over its threads; for h2d, copy time from the copy
                        // stream's events (device time)
  // The thread CPU time of its items, summed over its threads: read, decompress and preprocess
  // (decode inside it included); 0 for the others. ThreadCpuNs is read around 1 item in 8 of
  // each thread (pipeline/internal/stage_recorder.h CpuSample) and busy_ns is scaled by those
  // items' CPU over wall time. busy_ns - cpu_ns is time its threads were off the CPU inside an
  // item: blocked (read's I/O) or waiting for a core.
  int64_t cpu_ns = 0;
  // Time waiting for input. Measured for kDelivery (consumer blocked in Next()); for graph
  // nodes derived as concurrency * (last_end - first_start) - busy - wait_output, clamped at 0.
  int64_t wait_input_ns = 0;
  // Time held back by what follows (never inside busy): read, the gaps the frame budget held
  // the reader; preprocess, the wall time during which a ready batch waited for a pinned
  // buffer x its threads, at most its idle time; h2d, the same for a device ring slot;
  // decompress, an estimate: its idle time in the share of the reader's window that the frame
  // budget held the reader. pinned_wait: the wall time during which at least one batch waited
  // for a buffer (its busy_ns is the batches' waits summed, several at once).
  int64_t wait_output_ns = 0;
  // Queue high-water mark: read: decoded frames resident; decompress: frames queued for it;
  // preprocess: batches ready but not started; pinned_wait: buffers in use; h2d: batches
  // waiting for a device ring slot (at most the pinned pool); delivery: batches waiting in the
  // delivery queue.
  uint64_t queue_high_water = 0;
  int64_t first_start_ns = 0;  // 0 until the first item
  int64_t last_end_ns = 0;
  // Each item's wall time (busy time per item: a frame, an image, a batch; pinned_wait: a
  // batch's wait for a buffer, of the batches that waited; delivery: a batch held by the
  // consumer): its p50, p99 and max (pipeline/latency_histogram.h).
  LatencySummary latency;

  double items_per_second() const;  // items / (last_end - first_start)
};

// One op of the run's transform chain (BatchFormat::transforms) and the time it took on the
// samples the chain timed (TransformChain::TimesSample: 1 in TransformChain::kTimingStride),
// inside the preprocess stage's busy time.
struct ChainOpTime {
  std::string op;          // the op's identity, e.g. "RandomCrop(32, padding=4)"
  int64_t sampled_ns = 0;  // summed over the timed samples and the threads
};

// What the read stage did for one epoch's frames: a cold first epoch (read from disk) against
// warm ones (the page cache) shows here.
struct EpochReads {
  uint64_t epoch = 0;
  uint64_t frames = 0;
  uint64_t bytes = 0;   // stored bytes read
  int64_t busy_ns = 0;  // the reader's time on them (one thread)
};

struct PipelineStats {
  std::array<StageStats, kNumPipelineStages> stages;
  int64_t start_ns = 0;     // when the pipeline was created
  int64_t snapshot_ns = 0;  // when this snapshot was taken
  int threads = 0;          // TBB arena size
  uint64_t batches_delivered = 0;
  uint64_t samples_delivered = 0;
  uint64_t frames_read = 0;
  // Frames decoded by this pipeline (corrupt ones not counted). Data parallel: the sum over
  // ranks, divided by what one process decodes, is the share of decoding done twice.
  uint64_t frames_decoded = 0;
  // The images the decode stage decoded, at their whole size (width x height x the output's
  // channels), summed: its bytes are those it decoded, fewer where a crop-window decode covered
  // only the window.
  uint64_t decode_stored_bytes = 0;
  // The least-squares line through the decoded images' (whole size in bytes, as
  // decode_stored_bytes counts it; decode's wall time in ns) pairs, as its sums: what part of a
  // decode is paid per image whatever its size (the report's price of smaller images).
  struct DecodeCostFit {
    double n = 0, sum_x = 0, sum_y = 0, sum_xx = 0, sum_xy = 0;
    void Add(double x, double y) {
      n += 1;
      sum_x += x;
      sum_y += y;
      sum_xx += x * x;
      sum_xy += x * y;
    }
  } decode_cost_fit;
  uint64_t skipped_frames = 0;   // --on-corrupt=skip: corrupt frames met (per epoch read)
  uint64_t skipped_records = 0;  // records of those frames that a batch would have held
  uint64_t empty_batches = 0;    // batches all of whose samples were skipped (not delivered)
  std::vector<std::string> corrupt_frames;  // distinct DataLoss messages, first 16
  uint32_t pool_buffers = 0;
  // Frames that may be read and not yet freed at once: the limiter's budget (decoded or
  // queued for decompress) plus the one frame the reader holds while the budget is full.
  uint32_t frame_budget = 0;
  // Frames the reader hints ahead (remote datasets: requests in flight) at the end of the run:
  // PipelineResources::read_concurrency, or what the reader's tuning chose when that was 0.
  uint32_t read_concurrency = 0;
  bool read_concurrency_tuned = false;
  uint32_t ring_depth = 0;  // device batch slots (0 without upload)
  uint64_t pool_bytes = 0;  // the pinned batch pool: pool_buffers x bytes per buffer
  // Decoded-frame buffers allocated so far (they are recycled, never freed before the pipeline):
  // buffers x the largest raw frame; at most (frame_budget + decompress threads) buffers.
  uint64_t frame_buffer_bytes = 0;
  // Stored-frame buffers (read -> decompress, recycled too): buffers x the largest stored frame;
  // at most frame_budget + 1 buffers.
  uint64_t stored_buffer_bytes = 0;
  uint64_t trace_dropped = 0;  // spans not recorded because the trace buffer was full
  // The transform chain, in order (empty without transforms), and how many samples it timed:
  // an op's share of the preprocess stage's time is its sampled_ns x (preprocess samples /
  // chain_timed_samples) over the stage's busy_ns.
  std::vector<ChainOpTime> chain_ops;
  uint64_t chain_timed_samples = 0;
  // The read stage per epoch, in epoch order (epochs whose frames this pipeline read).
  std::vector<EpochReads> epoch_reads;

  const StageStats& operator[](Stage s) const { return stages[static_cast<int>(s)]; }
  // One line per stage, for logs and tests; a stage by its Stage value (the pipeline has no
  // names: they are report/stages.h's).
  std::string ToString() const;
};

// One span of work on one item, for the Chrome/Perfetto timeline.
struct TraceSpan {
  Stage stage = Stage::kRead;
  uint64_t id = 0;      // run-wide frame sequence number (read, decompress) or batch id
  uint32_t thread = 0;  // small per-thread number, stable for a thread's lifetime
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// steady_clock::now() in nanoseconds.
int64_t NowNs();
// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID): a stage reads it
// before and after a sample of its items (frames or batches, never single samples), so its
// cpu_ns is work, and busy time beyond it is blocking or waiting for a core.
int64_t ThreadCpuNs();

// Busy-waits `us` microseconds: the injected-delay diagnostic of every stage, compute included
// (spinning, not sleeping, so the delay shows up as busy CPU time, like real work would).
// Ends early once EndInjectedDelays() has been called.
void SpinFor(int64_t us);
// Sleeps `us` microseconds (the read stage's injected delay: I/O latency, not CPU work); ends
// early once EndInjectedDelays() has been called.
void SleepFor(int64_t us);
// From now on, for the rest of the process, injected delays (SpinFor, SleepFor) end at once,
// also those in progress: a stop must not wait out a delay of hours. Async-signal-safe (a
// lock-free atomic store): sluice-train's stop handler calls it.
void EndInjectedDelays();

}  // namespace sluice

#endif  // SLUICE_PIPELINE_STAGE_STATS_H_
