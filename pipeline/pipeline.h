// Pipeline: the oneTBB flow graph from shard files to batches ready for the device.
//
//   read (input_node, serial) -> frame budget (limiter_node) -> decompress (function_node,
//   parallel) -> [batch scheduler] -> assemble+preprocess (function_node, parallel, into a
//   PinnedBufferPool buffer) -> sequencer_node(batch id) -> [upload: async_node, on a copy
//   stream of the placement's device] -> delivery queue -> Next()
//
// docs/architecture.md ("Pipeline") draws the graph, the threads, who owns each buffer and
// what bounds memory.
//
// Usage (the training loop):
//   PipelineOptions options;                   // order, format, resources, diagnostics
//   options.placement.device = backend->device();  // null for the CPU backend
//   ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(dataset, options));
//   BatchLease lease;
//   while (true) {
//     ASSIGN_OR_RETURN(bool got, pipeline->Next(&lease));
//     if (!got) break;                         // end of the run
//     RETURN_IF_ERROR(backend->TrainStep(lease.view(), lr));
//     lease.Release(backend->compute_stream()); // or let the lease go out of scope
//   }
//   PipelineStats stats = pipeline->Stats();
//
// Order: a pure function of (dataset, OrderSpec, epoch); never of threads, pool size, placement
// or timing. Data parallel (options.slice): the global batches are the same for every world
// size; each rank delivers its frame-aware slice of each (docs/architecture.md, "Data
// parallel"), and with world_size > 1 every step is delivered on every rank, even when the
// rank's slice is empty (a last global batch with fewer samples than ranks, or all of the
// slice skipped as corrupt), so ranks stay in lockstep. With world_size 1 a batch all of whose
// samples were skipped is not delivered.
// Ownership: the Pipeline borrows the Dataset (which owns the shard readers) and the placement's
// Device; both must outlive the pipeline and every lease. A lease owns its batch memory (a
// pinned buffer or a device slot) until released; the view's pointers are valid until then.
// Errors: Create returns kInvalidArgument for bad options (zero batch size, epochs or ring
// depth; a start step past the epoch; an h2d format the samples cannot take; transforms that
// do not fit the samples or the format ("transforms: ..."); a slice with
// world_size 0 or rank >= world_size), kNotFound /
// kDataLoss from opening the shards, kResourceExhausted when the pinned buffers or the device
// slots cannot be allocated, and the device layer's kInternal (naming the failed call) when
// the copy stream or events cannot be created. Next returns kDataLoss naming file, frame and
// byte offset for a corrupt frame (on_corrupt = kFail), kFailedPrecondition when the consumer
// already holds every buffer, kCancelled after Cancel(), the Env's I/O errors, and a device
// error from the upload; NextFor also kDeadlineExceeded when its timeout passed.
// Thread safety: Next() is called by one consumer thread; Cancel() and Stats() from any
// thread. Leases may be released from any thread. While it lives, the pipeline holds a
// process-wide tbb::global_control raising TBB's worker limit (resources.raise_tbb_worker_limit).
#ifndef SLUICE_PIPELINE_PIPELINE_H_
#define SLUICE_PIPELINE_PIPELINE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "device/device.h"
#include "pipeline/batch.h"
#include "pipeline/stage_stats.h"
#include "pipeline/transforms/transform_spec.h"
#include "storage/dataset.h"

namespace sluice {

class PoolCache;

namespace pipeline_internal {
class PipelineCore;
}

enum class OnCorrupt : uint8_t { kFail, kSkip };
absl::StatusOr<OnCorrupt> ParseOnCorrupt(absl::string_view name);  // "fail" | "skip"

inline constexpr uint32_t kAutoPoolSamples = 4096;
inline constexpr uint64_t kAutoPoolBytes = uint64_t{128} << 20;
// What pool_size = 0 resolves to for batches of `batch_samples` samples in buffers of
// `buffer_bytes`: enough buffers for kAutoPoolSamples samples but no more than kAutoPoolBytes of
// them, and at least 4, at most 256 (224x224 f32 batches of 32: 6 buffers, not 128 = 2.4 GB).
// With `steps_per_epoch` known (not 0): a run of one epoch, at most its batches (more buffers
// are never used: a 151-image test split took 128 MB); a run of several, at most a
// 1/kAutoPoolEpochFraction of an epoch's batches, but at least 2 per preprocess thread (and 4):
// a pool that holds whole epochs lets the pipeline build the next epoch during an evaluation,
// so that the later epochs' rate counts work done outside their training time. One epoch keeps
// the deep pool: with 12 buffers for 47 batches of JPEGs on 2 cores, the run was 8% slower
// than with 47 or more (batches waited for a buffer 35% of the time while CPU compute's
// threads could not fill the cores alone).
inline constexpr uint32_t kAutoPoolEpochFraction = 4;
uint32_t AutoPoolSize(uint64_t batch_samples, uint64_t buffer_bytes, uint64_t steps_per_epoch = 0,
                      int preprocess_threads = 0, uint64_t epochs = 1);

// PipelineOptions are grouped by what may change them, so that tuning a resource can never
// change the order, and placement cannot disagree with the backend that reads the batches.

// What defines the sequence of samples. Part of a run's identity: checkpoints record it and a
// resumed run must use the same (the order is a pure function of these, the dataset and the
// epoch; never of threads, pool size or timing).
struct OrderSpec {
  uint32_t batch_size = 32;
  uint64_t seed = 0;
  bool shuffle = true;
  // W: frames per shuffle window; 0 = every frame (a full shuffle). Memory grows with W
  // (about W decoded frames resident), shuffle quality too (docs/architecture.md, "Order").
  uint32_t shuffle_window_frames = 64;
  bool drop_last = false;
};

// Steps (global batches) in one full epoch over `records` records: ceil(records / batch_size),
// or floor with drop_last (a short last batch is dropped); 0 when batch_size is 0. The same on
// every rank of a data-parallel run.
uint64_t StepsPerEpoch(uint64_t records, const OrderSpec& order);

// This process's share of every global batch in data-parallel training.
struct DataParallelSlice {
  uint32_t rank = 0;
  uint32_t world_size = 1;
};

// What a batch holds: the input contract of the model (--h2d-format, normalization).
struct BatchFormat {
  H2DFormat h2d_format = H2DFormat::kF32;
  // Per channel; applied on the CPU for f16/f32, carried by u8 batches for the device
  // (BatchView::normalization). A length other than 1 or the channel count fails Create.
  Normalization normalization;
  // The ops each sample goes through before the conversion to h2d_format (docs/transforms.md),
  // parsed where the setting enters (transform_spec.h); empty: none. The chain's output is the
  // batch's sample spec; the rules between it and the settings above: pipeline/batch_format.h.
  TransformSpec transforms;
  // h2d_format is the automatic choice (--h2d-format=auto): a chain that outputs f32 or f16
  // samples sets the format to fit them.
  bool h2d_auto = false;
  // The batch's memory order: kCHW ([B, C, H, W] contiguous), or kHWC, torch's channels_last
  // ([B, C, H, W] with strides (HWC, 1, WC, C)), which the preprocess threads write directly.
  // kHWC and an h2d_format of bf16 are sluice.Loader's (memory_format=torch.channels_last,
  // dtype=torch.bfloat16); sluice-train's engine reads CHW u8/f16/f32 batches.
  SampleLayout layout = SampleLayout::kCHW;
};

// Which part of the run this pipeline delivers.
struct RunSpan {
  uint64_t start_epoch = 0;
  uint64_t start_step = 0;  // first step within start_epoch (mid-epoch resume)
  uint64_t epochs = 1;      // epochs to deliver, start_epoch included
};

// Device batch slots by default, for sluice-train and sluice.Loader alike: enough for the copy
// of the next batches to run while a step computes (docs/bottleneck.md, "Copies hidden behind
// compute").
inline constexpr uint32_t kDefaultDeviceRingDepth = 8;

// Resources: how much CPU, memory and read-ahead the pipeline uses. The only settings that
// autotune changes; they never change which samples a batch holds or their order.
// The read concurrency's tuning (PipelineResources::read_concurrency 0): where it starts, and
// its bound (storage/remote/remote_env.h kMaxReadConcurrency).
inline constexpr uint32_t kAutoReadConcurrencyStart = 4;
inline constexpr uint32_t kMaxReadConcurrencyTuned = 256;

struct PipelineResources {
  int threads = 0;                 // TBB arena size; 0: UsableCores() (affinity mask, cgroup)
  int decompress_threads = 0;      // concurrency of decompress; 0: threads
  int preprocess_threads = 0;      // concurrency of assemble+preprocess; 0: threads
  uint32_t read_ahead_frames = 4;  // frames read beyond the deadlock-free minimum
  // Frames of the epoch's order after the one being read that the reader hints
  // (ShardReader::WillReadFrame): a remote dataset fetches that many ranges at once
  // (docs/storage.md, "Concurrency"); local files ignore hints. 0: tuned by the reader while
  // it reads (kAutoReadConcurrencyStart doubled while the rate it delivers rises by 10%).
  uint32_t read_concurrency = 0;
  // Pinned batch buffers; 0: AutoPoolSize (kAutoPoolSamples samples, at most kAutoPoolBytes).
  // A thread hand-off costs 100-200 us on a VM, so small batches need many buffers in flight
  // to hide it (measured: batch 32 with 4 buffers left compute waiting 22% of the time, with
  // 64-128 buffers 2-4%). Memory: pool_size x batch bytes.
  uint32_t pool_size = 0;
  uint32_t device_ring_depth = kDefaultDeviceRingDepth;  // device batch slots (device placement)
  // TBB's default market has (cores - 1) workers; raise it so an arena of `threads` is full.
  // This is a process-wide tbb::global_control held while the pipeline lives: two pipelines
  // alive at once share it (the larger limit wins while both live).
  bool raise_tbb_worker_limit = true;
  // Pools kept from one pipeline to the next (pipeline/pool_cache.h): the batch and frame
  // buffers a finished pipeline gives back are taken by the next one of the same shape. Null:
  // every pipeline allocates its own. sluice.Loader shares one across its passes.
  std::shared_ptr<PoolCache> pool_cache;
};

// Where batches are delivered. It follows from the backend that consumes them
// (Backend::placement()); never set it by hand for a training run.
struct Placement {
  // Upload every batch to this device (borrowed; must outlive the pipeline and its leases).
  // Null: batches stay in host memory (the CPU backend reads the pinned buffer in place).
  device::Device* device = nullptr;
};

// Diagnostics: change what the run measures, never what it computes (except what-if runs,
// which are for measurement only).
struct PipelineDiagnostics {
  // Per-item delay added inside a stage (read, decompress, preprocess, h2d): a sleep for read
  // (I/O latency), a busy-wait for the others (CPU work).
  std::array<int64_t, kNumPipelineStages> inject_delay_us = {};
  // A what-if run (a stage whose StageInfo::what_if is true, kStageTable): make that stage free
  // to measure what the rest can do. nullopt: a normal run.
  //   kRead: stored frames are read into RAM before the run; the read stage serves them.
  //   kDecompress: frames are decoded into RAM before the run; decompress hands them out.
  //   kPreprocess: the batches of the first epoch are built before the run; assemble hands out
  //     the prebuilt batch of the same step (later epochs reuse them: same sizes, stale order).
  //   kH2D: no copy; the device slot of the batch is reused as is (CUDA builds).
  //   kTransforms: the transform chain's cost removed (each sample a copy of a prebuilt chain
  //     output of the right spec; the gather and the labels stay); only with transforms.
  //   kDecode: each decode replaced by one of the first frame's decoded images.
  //   kCompute is the job's (TrainJobOptions::compute_free): the pipeline runs as normal.
  std::optional<Stage> what_if;
  size_t trace_capacity = 0;  // per-item spans kept for the timeline; 0: none
};

struct PipelineOptions {
  OrderSpec order;  // batch_size is the global batch size (all ranks together)
  DataParallelSlice slice;
  BatchFormat format;
  RunSpan span;
  OnCorrupt on_corrupt = OnCorrupt::kFail;
  PipelineResources resources;
  Placement placement;
  PipelineDiagnostics diagnostics;
};

// One delivered batch. Owns its buffer (pinned host buffer, or device slot) until Release()
// or destruction; the Pipeline's memory stays alive while a lease does.
class BatchLease {
 public:
  BatchLease() = default;
  BatchLease(BatchLease&& o) noexcept { *this = std::move(o); }
  BatchLease& operator=(BatchLease&& o) noexcept;
  BatchLease(const BatchLease&) = delete;
  BatchLease& operator=(const BatchLease&) = delete;
  ~BatchLease() { Release(); }

  bool valid() const { return core_ != nullptr; }
  const BatchView& view() const { return view_; }
  uint64_t batch_id() const { return id_; }  // run-wide sequence number, from 0

  // Gives the batch back. For device batches `stream` is the stream whose work reads it: the
  // slot is reused only after that work completes (an event recorded on it). Null: the caller
  // guarantees no enqueued work still reads the batch. Host batches ignore `stream`.
  void Release(device::Stream* stream = nullptr);

 private:
  friend class pipeline_internal::PipelineCore;
  std::shared_ptr<pipeline_internal::PipelineCore> core_;
  uint64_t id_ = 0;
  int64_t handed_out_ns_ = 0;
  BatchView view_;
};

class Pipeline {
 public:
  // `dataset` must outlive the pipeline. The graph starts reading immediately.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(const Dataset* dataset,
                                                          const PipelineOptions& options);
  ~Pipeline();  // Cancel(), then waits for every graph task; outstanding leases stay valid

  // Blocks until the next batch in order. true: `*lease` holds it (a previous lease in
  // `*lease` is released first); false: the run is over. A consumer holding pool_size leases
  // and asking for another gets kFailedPrecondition (it would wait forever).
  absl::StatusOr<bool> Next(BatchLease* lease);
  // Next() that waits at most `timeout`: kDeadlineExceeded when no batch, end or error came
  // by then (nothing is consumed; `*lease` was released; call again). Lets a consumer that
  // must react to something else while it waits (a Python interpreter checking for Ctrl-C)
  // wait in slices.
  absl::StatusOr<bool> NextFor(BatchLease* lease, absl::Duration timeout);

  // Stops the run: in-flight work drains, Next() returns kCancelled. Idempotent.
  void Cancel();

  PipelineStats Stats() const;
  std::vector<TraceSpan> Trace() const;

  // Whether the consumer is inside the span its report covers (true from the start): a trainer
  // leaves it between epochs (evaluation, the epoch's end) and while it writes a checkpoint,
  // where the pipeline goes on building batches ahead. Items that end while it is outside are
  // counted in StageStats::samples_outside_span, so a report over the training time can tell
  // the work it contains from the work done before it. Any thread; relaxed.
  void SetConsumerInSpan(bool in_span);

  // Global steps: the same on every rank of a data-parallel run.
  uint64_t steps_per_epoch() const;
  uint64_t total_batches() const;  // batches this run delivers (before skipped ones)
  bool uploads_to_device() const;
  // Whether every batch of the run is built and queued for the consumer (it may not have taken
  // them yet): the pipeline's threads have no more work. sluice.Loader starts the next pass's
  // pipeline then (docs/python.md, "Work ahead"). Any thread.
  bool built_all() const;
  const PipelineOptions& options() const;

 private:
  explicit Pipeline(std::shared_ptr<pipeline_internal::PipelineCore> core)
      : core_(std::move(core)) {}
  std::shared_ptr<pipeline_internal::PipelineCore> core_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_PIPELINE_H_
