// PipelineCore: the state and the flow graph behind Pipeline (pipeline/pipeline.h). Shared by
// the Pipeline and its outstanding leases, so a lease released after the Pipeline is gone
// still returns its buffer to a live pool.
#ifndef SLUICE_PIPELINE_INTERNAL_PIPELINE_CORE_H_
#define SLUICE_PIPELINE_INTERNAL_PIPELINE_CORE_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <deque>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/tbb/flow_graph.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"
#include "pipeline/convert.h"
#include "pipeline/internal/device_uploader.h"
#include "pipeline/internal/order_planner.h"
#include "pipeline/internal/stage_recorder.h"
#include "pipeline/pinned_buffer_pool.h"
#include "pipeline/pipeline.h"

namespace sluice::pipeline_internal {

// A decoded frame of one epoch. `data` points at `owned` or at a what-if cache entry.
struct DecodedFrame {
  const char* data = nullptr;
  std::unique_ptr<char[]> owned;
  uint32_t records = 0;
  bool corrupt = false;
};

// Mutable state of one planned epoch. Frames are written by decompress before the scheduler
// publishes them (under its mutex), read by assemble, freed by the last batch that needs them.
struct EpochRun {
  EpochPlan plan;
  uint64_t first_batch_id = 0;  // run-wide id of plan batch 0
  uint64_t first_frame_seq = 0;
  std::vector<DecodedFrame> frames;                    // by slot
  std::unique_ptr<std::atomic<uint32_t>[]> slot_refs;  // batches still to assemble, by slot
  std::vector<uint32_t> batch_missing;                 // frames still to decode (scheduler mu)
};

// Message read -> decompress. Copyable (TBB buffers copy messages); big parts are shared.
struct FrameMsg {
  std::shared_ptr<EpochRun> run;
  uint32_t slot = 0;
  uint64_t seq = 0;  // run-wide frame sequence number
  bool is_last = false;
  std::shared_ptr<std::string> stored;  // null when served from the what-if read cache
};

struct BatchPayload {
  PinnedBuffer buffer;
  const char* samples = nullptr;  // into `buffer` or the what-if prebuilt batch
  const int32_t* labels = nullptr;
  uint32_t size = 0;
  uint32_t device_slot = 0;
};

// Message assemble -> sequencer -> delivery.
struct BatchMsg {
  std::shared_ptr<EpochRun> run;
  uint32_t index = 0;  // within run->plan
  uint64_t id = 0;     // run-wide batch id == sequencer order
  bool is_last = false;
  std::shared_ptr<BatchPayload> payload;  // null until assembled (or when cancelled)
};

class PipelineCore : public std::enable_shared_from_this<PipelineCore> {
 public:
  PipelineCore(const Dataset* dataset, const PipelineOptions& options);
  ~PipelineCore();

  absl::Status Init();  // plans, what-if caches, pool, graph; starts reading
  absl::StatusOr<bool> Next(BatchLease* lease);
  void Cancel();
  void Shutdown();
  void ReleaseLease(uint64_t id, device::Stream* stream, int64_t handed_out_ns);
  PipelineStats Stats() const;
  std::vector<TraceSpan> Trace() const { return trace_ ? trace_->Snapshot() : std::vector<TraceSpan>{}; }

  const PipelineOptions& options() const { return opt_; }
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  uint64_t total_batches() const { return total_batches_; }
  bool uploads_to_device() const { return uploader_ != nullptr; }

 private:
  using Graph = oneapi::tbb::flow::graph;
  using UploadNode = oneapi::tbb::flow::async_node<BatchMsg, BatchMsg>;

  absl::Status BuildLayout();
  absl::Status BuildWhatIfCaches();
  void BuildGraph();
  FrameMsg ReadBody(oneapi::tbb::flow_control& fc);
  bool AdvanceEpoch();
  void DecompressBody(const FrameMsg& m);
  BatchMsg AssembleBody(BatchMsg m);
  void GatherInto(const EpochRun& run, uint32_t index, char* samples, int32_t* labels,
                  uint32_t* size) const;
  void UploadBody(const BatchMsg& m, UploadNode::gateway_type& gw);
  void EnqueueUpload(const BatchMsg& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ring_mu_);
  void Deliver(const BatchMsg& m);
  void RingRelease(uint64_t id, uint32_t slot, device::Stream* stream);
  void OnFrameReady(const std::shared_ptr<EpochRun>& run, uint32_t slot);
  void OnPinnedReleased(uint64_t id);
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sched_mu_);
  void Fail(absl::Status s);
  void Record(Stage s, int64_t start, int64_t end, uint64_t id, uint64_t samples, uint64_t bytes);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  const Dataset* dataset_;
  PipelineOptions opt_;
  SplitLayout layout_;
  OrderOptions order_;
  RecordSpec spec_;
  std::vector<const ShardReader*> readers_;
  std::optional<SampleConverter> converter_;
  uint64_t steps_per_epoch_ = 0;
  uint64_t total_batches_ = 0;
  uint32_t frame_budget_ = 0;
  // Decoded-frame buffers are recycled (at most frame_budget + decompress_threads exist), so
  // the hot path does not malloc/free and page-fault ~200 KB per frame.
  std::unique_ptr<char[]> TakeFrameBuffer();
  void ReturnFrameBuffer(std::unique_ptr<char[]> buf);
  size_t max_raw_frame_ = 0;
  std::mutex frame_buffers_mu_;
  std::vector<std::unique_ptr<char[]>> frame_buffers_;
  size_t sample_region_ = 0;  // bytes of the samples part of a batch buffer (64-aligned)
  size_t label_offset_ = 0;

  // What-if caches (built before the graph starts; read-only afterwards).
  std::vector<std::string> stored_cache_;
  std::vector<std::string> decoded_cache_;
  std::vector<char> decoded_corrupt_;
  std::vector<std::vector<char>> prebuilt_;  // by step of the start epoch
  std::vector<uint32_t> prebuilt_size_;
  uint64_t prebuilt_first_step_ = 0;

  // Read stage state: touched only by the (serial) input_node body.
  uint64_t next_epoch_ = 0;
  uint64_t next_batch_id_ = 0;
  uint64_t next_frame_seq_ = 0;
  std::shared_ptr<EpochRun> reading_;
  uint32_t next_slot_ = 0;
  int64_t read_last_end_ns_ = 0;

  std::atomic<bool> cancelled_{false};
  std::atomic<int64_t> frames_resident_{0};
  std::atomic<int64_t> frames_queued_{0};
  std::atomic<uint64_t> frames_read_{0}, skipped_frames_{0}, skipped_records_{0}, empty_batches_{0};
  int64_t start_ns_ = 0;

  StageRecorder rec_[kNumPipelineStages];
  std::unique_ptr<TraceBuffer> trace_;

  std::unique_ptr<PinnedBufferPool> pool_;
  std::unique_ptr<DeviceUploader> uploader_;

  // Batch scheduler: dispatches a batch to assemble when all its frames are decoded and the
  // buffer grant rule allows it (DispatchLocked explains why that rule is deadlock-free).
  struct Ready {
    uint64_t id;
    int64_t ready_ns;
    std::shared_ptr<EpochRun> run;
    uint32_t index;
    bool operator>(const Ready& o) const { return id > o.id; }
  };
  // std::mutex, not absl::Mutex: Debian's prebuilt Abseil is not instrumented for
  // ThreadSanitizer, so its locks would be invisible to scripts/sanitize.sh.
  std::mutex sched_mu_;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready_ ABSL_GUARDED_BY(sched_mu_);
  uint64_t outstanding_ ABSL_GUARDED_BY(sched_mu_) = 0;  // buffers granted, not yet returned
  uint64_t lowest_undispatched_ ABSL_GUARDED_BY(sched_mu_) = 0;
  std::set<uint64_t> dispatched_ahead_ ABSL_GUARDED_BY(sched_mu_);  // dispatched ids above it
  bool shut_down_ ABSL_GUARDED_BY(sched_mu_) = false;

  // Device ring (CUDA): upload of id may start when id < ring_lowest_unreleased + depth.
  std::mutex ring_mu_;
  std::deque<std::pair<BatchMsg, int64_t>> ring_pending_ ABSL_GUARDED_BY(ring_mu_);
  uint64_t ring_lowest_unreleased_ ABSL_GUARDED_BY(ring_mu_) = 0;
  std::set<uint64_t> ring_released_ ABSL_GUARDED_BY(ring_mu_);
  UploadNode::gateway_type* gateway_ = nullptr;

  // Delivery queue (bounded by the pool: at most pool_size batches exist).
  mutable std::mutex delivery_mu_;
  std::condition_variable delivery_cv_;
  int consumer_waiting_ = 0;  // guarded by delivery_mu_
  std::deque<BatchMsg> delivered_ ABSL_GUARDED_BY(delivery_mu_);
  bool end_ ABSL_GUARDED_BY(delivery_mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(delivery_mu_);
  std::map<uint64_t, std::shared_ptr<BatchPayload>> leased_ ABSL_GUARDED_BY(delivery_mu_);
  std::vector<std::string> corrupt_messages_ ABSL_GUARDED_BY(delivery_mu_);
  uint64_t batches_delivered_ ABSL_GUARDED_BY(delivery_mu_) = 0;
  uint64_t samples_delivered_ ABSL_GUARDED_BY(delivery_mu_) = 0;

  // TBB. Declared last: destroyed first, so messages still buffered in nodes release their
  // pinned buffers into a live pool.
  std::unique_ptr<oneapi::tbb::global_control> worker_limit_;
  std::unique_ptr<oneapi::tbb::task_arena> arena_;
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<oneapi::tbb::flow::input_node<FrameMsg>> read_node_;
  std::unique_ptr<oneapi::tbb::flow::limiter_node<FrameMsg>> budget_node_;
  std::unique_ptr<oneapi::tbb::flow::function_node<FrameMsg>> decompress_node_;
  std::unique_ptr<oneapi::tbb::flow::function_node<BatchMsg, BatchMsg>> assemble_node_;
  std::unique_ptr<oneapi::tbb::flow::sequencer_node<BatchMsg>> sequencer_node_;
  std::unique_ptr<UploadNode> upload_node_;
  std::unique_ptr<oneapi::tbb::flow::function_node<BatchMsg>> deliver_node_;
  bool shutdown_done_ = false;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_PIPELINE_CORE_H_
