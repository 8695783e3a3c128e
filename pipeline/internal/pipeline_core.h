// PipelineCore: the state and the flow graph behind Pipeline (pipeline/pipeline.h). Shared by
// the Pipeline and its outstanding leases, so a lease released after the Pipeline is gone
// still returns its buffer to a live pool.
//
// It owns the graph and the stage bodies (read, decompress, assemble, upload, deliver), the
// read state and the what-if caches; the shared state between stages lives in parts that each
// own one lock and know nothing of TBB: FrameBufferPool (decoded-frame buffers),
// BatchScheduler (which ready batch gets a pinned buffer), DeviceRing (which batch may upload
// into which device slot) and DeliveryQueue (the hand-over to the consumer).
// Where their locks nest, the order is DeviceRing -> BatchScheduler -> DeliveryQueue: the
// ring's callbacks (enqueue an upload, release a slot) may return a pinned buffer or report
// an error under the ring's lock; the scheduler's dispatch callback takes no other lock.
#ifndef SLUICE_PIPELINE_INTERNAL_PIPELINE_CORE_H_
#define SLUICE_PIPELINE_INTERNAL_PIPELINE_CORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "oneapi/tbb/flow_graph.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"
#include "pipeline/batch_format.h"
#include "pipeline/convert.h"
#include "pipeline/internal/batch_scheduler.h"
#include "pipeline/internal/delivery_queue.h"
#include "pipeline/internal/device_ring.h"
#include "pipeline/internal/device_uploader.h"
#include "pipeline/internal/frame_buffer_pool.h"
#include "pipeline/internal/order_planner.h"
#include "pipeline/internal/pipeline_messages.h"
#include "pipeline/internal/stage_recorder.h"
#include "pipeline/pinned_buffer_pool.h"
#include "pipeline/pipeline.h"
#include "pipeline/pool_cache.h"
#include "storage/frame_view.h"

namespace sluice::pipeline_internal {

class PipelineCore : public std::enable_shared_from_this<PipelineCore> {
 public:
  PipelineCore(const Dataset* dataset, const PipelineOptions& options);
  ~PipelineCore();

  absl::Status Init();  // plans, what-if caches, pool, graph; starts reading
  absl::StatusOr<bool> Next(BatchLease* lease,
                            std::optional<std::chrono::steady_clock::time_point> deadline = {});
  void Cancel();
  void Shutdown();
  void ReleaseLease(uint64_t id, device::Stream* stream, int64_t handed_out_ns);
  PipelineStats Stats() const;
  void SetConsumerInSpan(bool in_span);
  std::vector<TraceSpan> Trace() const {
    return trace_ ? trace_->Snapshot() : std::vector<TraceSpan>{};
  }

  const PipelineOptions& options() const { return opt_; }
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  uint64_t total_batches() const { return total_batches_; }
  bool uploads_to_device() const { return uploader_ != nullptr; }
  bool built_all() const { return delivery_.ended(); }

 private:
  using Graph = oneapi::tbb::flow::graph;
  using UploadNode = oneapi::tbb::flow::async_node<BatchMsg, BatchMsg>;

  absl::Status TakePools();
  void GivePoolsBack();
  absl::Status BuildLayout();
  // The batch's sample spec and its converter, or the transforms' preprocessor and scratch.
  absl::Status InitPreprocess();
  absl::Status BuildWhatIfCaches();
  absl::Status BuildChainFreeSamples();  // what-if transforms
  absl::Status BuildDecodedImages();     // what-if decode
  // The decoded bytes of the layout's frame `index` (its first: index 0).
  absl::Status ReadLayoutFrame(size_t index, std::string* raw) const;
  // Calls `take` on the records of the layout's first frame until `enough()`, and of the next
  // (at most 16 frames) while none went through: under on_corrupt=skip a corrupt frame, and a
  // record `take` refuses with kDataLoss, is passed over. Errors: `take`'s (naming the shard and
  // record), or kDataLoss
  // "<what>: no record of the first N frames ... goes through" when `take` took none.
  absl::Status ForEachLeadingRecord(
      const char* what, const std::function<absl::Status(const FrameView&, uint32_t)>& take,
      const std::function<bool()>& enough) const;
  void BuildGraph();
  static absl::Status CheckPipelineThreadsCanStart(int threads);
  FrameMsg ReadBody(oneapi::tbb::flow_control& fc);
  bool AdvanceEpoch();
  void DecompressBody(const FrameMsg& m);
  BatchMsg AssembleBody(BatchMsg m);
  void GatherInto(const EpochRun& run, uint32_t index, char* samples, int32_t* labels,
                  uint32_t* record_ids, uint32_t* size) const;
  // GatherInto through the transforms: each sample by preprocessor_, with `scratch` (one
  // thread's) and its per-op timing added to `op_ns`; returns how many samples were timed.
  // A record the chain refuses is skipped and counted, or fails the run (on_corrupt).
  uint32_t GatherThroughChain(const EpochRun& run, uint32_t index, char* samples, int32_t* labels,
                              uint32_t* record_ids, uint32_t* size, char* scratch, int64_t* op_ns);
  // Entry i of run's plan was refused with `s`: true when skipped (counted), false when the run
  // was failed with the shard file, the record id and the reason.
  bool SkipCorruptRecord(const EpochRun& run, uint32_t i, const absl::Status& s);
  // Gathers batch `index` of `run` by whichever path is set (a chain takes a scratch slot).
  void GatherBatch(const EpochRun& run, uint32_t index, char* base, uint32_t* size);
  uint32_t AcquireScratch();
  void ReleaseScratch(uint32_t slot);
  void UploadBody(const BatchMsg& m, UploadNode::gateway_type& gw);
  // DeviceRing's enqueue callback (runs under the ring's lock).
  void EnqueueUpload(const BatchMsg& m, uint32_t slot, int64_t waited_ns);
  void Deliver(const BatchMsg& m);
  // Host batches: delivers `m` and every batch built ahead of it that now follows in order,
  // on the thread that built it (no sequencer and deliver tasks, which waited behind the
  // next batches' assembly).
  void DeliverInOrder(BatchMsg m);
  void OnFrameReady(const std::shared_ptr<EpochRun>& run, uint32_t slot);
  // BatchScheduler's dispatch callback (runs under the scheduler's lock).
  void DispatchBatch(const ReadyBatch& r, int64_t now_ns);
  void OnPinnedReleased() { scheduler_->ReturnBuffer(); }
  void Fail(absl::Status s);
  // One item of stage `s`: its span (and trace span), counts and thread CPU time (-1: not
  // sampled, CpuSample).
  void Record(Stage s, int64_t start, int64_t end, uint64_t id, uint64_t samples, uint64_t bytes,
              int64_t cpu_ns = -1);
  // Fills the derived waits of the graph stages held back by their output.
  void SplitWaits(PipelineStats* st) const;
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  const Dataset* dataset_;
  PipelineOptions opt_;
  SplitLayout layout_;
  OrderOptions order_;
  RecordSpec spec_;
  std::vector<const ShardReader*> readers_;
  std::optional<SampleConverter> converter_;  // no transforms: stored sample -> batch sample
  // Transforms: the chain and the conversions around it, with one scratch slot per preprocess
  // thread (allocated in Init: a sample costs no allocation) and the ops' sampled time.
  std::optional<ChainPreprocessor> preprocessor_;
  struct ScratchSlot {
    std::unique_ptr<char[]> bytes;
    char* aligned = nullptr;     // 64-byte aligned within bytes
    std::vector<int64_t> op_ns;  // this batch's sampled per-op time
  };
  std::vector<ScratchSlot> scratch_;
  std::mutex scratch_mu_;
  std::vector<uint32_t> scratch_free_;
  std::unique_ptr<std::atomic<int64_t>[]> op_ns_total_;  // per op, over the run
  std::atomic<uint64_t> chain_timed_samples_{0};         // samples op_ns_total_ covers
  SampleSpec batch_sample_;  // one batch sample (the chain's output in the h2d format)
  uint64_t steps_per_epoch_ = 0;
  uint64_t total_batches_ = 0;
  uint32_t frame_budget_ = 0;
  size_t max_raw_frame_ = 0;
  size_t max_stored_frame_ = 0;
  // Decoded-frame buffers are recycled (at most frame_budget + decompress_threads exist).
  std::unique_ptr<FrameBufferPool> frame_buffers_;
  // Stored-frame buffers too (read -> decompress; at most frame_budget + 1 exist): a fresh
  // std::string per frame cost a malloc and a zero fill of every stored byte before the read
  // (perf: memset 2% of the workers' time at u8, batch 256).
  std::unique_ptr<FrameBufferPool> stored_buffers_;
  // Samples a local batch can hold: ceil(B / world_size).
  uint32_t batch_capacity_ = 0;
  // A batch buffer is [samples (64-aligned) | labels | record ids].
  size_t sample_region_ = 0;  // bytes of the samples part of a batch buffer (64-aligned)
  size_t label_offset_ = 0;
  size_t record_id_offset_ = 0;
  size_t batch_buffer_bytes_ = 0;
  // Device placement: the record ids of the batch in each device slot (host memory; the
  // pinned buffer goes back as soon as the copy is done, the slot lives until the release).
  std::vector<uint32_t> slot_record_ids_;

  // What-if caches (built before the graph starts; read-only afterwards).
  std::vector<std::string> stored_cache_;
  std::vector<std::string> decoded_cache_;
  std::vector<char> decoded_corrupt_;
  std::vector<std::vector<char>> prebuilt_;  // by step of the start epoch
  // What-if transforms: the chain's outputs of the first records, copied in place of each
  // sample's chain (cycled by the sample's position).
  std::vector<char> chain_free_samples_;
  uint32_t chain_free_count_ = 0;
  // What-if decode: the first records' decoded images, given to the ops after the decoder in
  // place of each sample's decode (cycled by the sample's position).
  struct DecodedImage {
    SampleSpec spec;
    std::vector<char> pixels;
  };
  std::vector<DecodedImage> decoded_images_;
  std::vector<uint32_t> prebuilt_size_;
  uint64_t prebuilt_first_step_ = 0;

  // Read stage state: touched only by the (serial) input_node body.
  uint64_t next_epoch_ = 0;
  uint64_t next_batch_id_ = 0;
  uint64_t next_frame_seq_ = 0;
  std::shared_ptr<EpochRun> reading_;
  uint32_t next_slot_ = 0;
  uint32_t hinted_end_ = 0;  // the epoch's slots before this one were hinted (WillReadFrame)
  // The read concurrency (frames hinted ahead) and its tuning (TuneReadConcurrency): the
  // frames and the start of the window being measured, the best rate and its concurrency.
  std::atomic<uint32_t> read_concurrency_{0};
  bool tuning_concurrency_ = false;
  bool tuning_warmed_ = false;
  uint32_t tune_frames_ = 0;
  int64_t tune_start_ns_ = 0;
  double tune_best_rate_ = 0;
  uint32_t tune_best_ = 0;
  void TuneReadConcurrency(int64_t now_ns);
  int64_t read_last_end_ns_ = 0;
  // Per-epoch read figures: written by the reader, copied by Stats() on another thread.
  mutable std::mutex epoch_reads_mu_;
  std::vector<EpochReads> epoch_reads_;

  std::atomic<bool> cancelled_{false};
  std::atomic<bool> consumer_in_span_{true};  // SetConsumerInSpan
  std::atomic<int64_t> frames_resident_{0};
  std::atomic<int64_t> frames_queued_{0};
  // The decoded images' whole sizes (PipelineStats::decode_stored_bytes).
  std::atomic<uint64_t> decode_stored_bytes_{0};
  // Each decoded image's size and time (PipelineStats::decode_cost_fit): a lock per image,
  // hundreds of microseconds of decoding each.
  mutable std::mutex decode_fit_mu_;
  PipelineStats::DecodeCostFit decode_fit_;
  std::atomic<uint64_t> frames_read_{0}, frames_decoded_{0}, skipped_frames_{0},
      skipped_records_{0}, empty_batches_{0};
  int64_t start_ns_ = 0;

  StageRecorders recorders_;
  std::unique_ptr<TraceBuffer> trace_;

  std::unique_ptr<PinnedBufferPool> pool_;
  std::unique_ptr<DeviceUploader> uploader_;

  // Declared after the pool: they hold batches (and so pinned buffers) until destroyed.
  std::optional<BatchScheduler> scheduler_;  // built by Init
  std::optional<DeviceRing> ring_;           // only when uploading to a device
  UploadNode::gateway_type* gateway_ = nullptr;
  DeliveryQueue delivery_;
  // DeliverInOrder: batches built before the next one to deliver, by id. Declared after the
  // pool: they hold pinned buffers.
  std::mutex in_order_mu_;
  std::map<uint64_t, BatchMsg> built_ahead_ ABSL_GUARDED_BY(in_order_mu_);
  uint64_t next_to_deliver_ ABSL_GUARDED_BY(in_order_mu_) = 0;

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
