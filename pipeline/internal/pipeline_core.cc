// The flow graph. Why each node is serial or parallel:
//  - read (input_node): serial by construction; one sequential pread stream per run is what
//    local disks and page caches like, and it keeps the read order (= the planned order) simple.
//    Read-ahead is bounded by the limiter_node behind it (the frame budget).
//  - decompress (function_node, decompress_threads): frames are independent; zstd is the most
//    CPU-hungry stage, so it runs in parallel with a ZSTD_DCtx per thread.
//  - assemble+preprocess (function_node, preprocess_threads): batches are independent once
//    their frames are decoded and they hold a buffer; parallel.
//  - host batches: the thread that built a batch appends it, and the batches built ahead of
//    it that now follow in order, to the consumer's queue (DeliverInOrder).
//  - device batches: sequencer_node restores batch-id order after the parallel stages; upload
//    (async_node, serial): copies must be enqueued in order on one copy stream; the body only
//    enqueues, the CUDA host callback completes through the gateway; deliver (function_node,
//    serial) appends to the consumer's queue in order.
//
// This file holds PipelineCore's lifecycle and wiring: Init (options, layout, pools, the
// scheduler and device ring), the graph's nodes and edges, the consumer's side (Next and a
// lease's release), cancellation, shutdown and the statistics. The stage bodies live beside it:
// read and decompress (with the what-if caches that stand in for them) in
// pipeline_core_frame_stages.cc; scheduling, assemble, upload and delivery in
// pipeline_core_batch_stages.cc.
#include "pipeline/internal/pipeline_core.h"

#include <algorithm>
#include <atomic>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/status_macros.h"

namespace sluice::pipeline_internal {

namespace flow = oneapi::tbb::flow;

namespace {
constexpr size_t kAlign = 64;

// What the transforms' scratch is sized for, in its allocation error: for encoded images the
// split's bound, and the image that sets it (sample.max_pixels_record, with its file), so the
// user knows which file to leave out (a record that cannot be decoded can be skipped with
// --on-corrupt=skip; one that sets the bound cannot: the scratch is sized before the run).
std::string ScratchBoundText(const Dataset& dataset) {
  const Manifest& m = dataset.manifest();
  if (!m.spec.encoded()) return "sized for the chain's largest sample";
  if (!m.image_bound) {
    return absl::StrCat("sized for the chain's largest sample; ",
                        Printable(dataset.manifest_path()),
                        " records no image sizes, so images of up to 4096x4096 are allowed");
  }
  std::string image = "the split's largest image";
  if (m.max_pixels_record) {
    absl::StrAppend(&image, ", record ", *m.max_pixels_record);
    if (*m.max_pixels_record < m.record_sources.size()) {
      absl::StrAppend(&image, " (", Printable(m.record_sources[*m.max_pixels_record]), ")");
    }
    absl::StrAppend(&image, ",");
  }
  return absl::StrCat("sized for the chain's largest sample: ", image, " declares ",
                      m.image_bound->max_pixels, " pixels (sample.max_pixels of ",
                      Printable(dataset.manifest_path()), "; widest ", m.image_bound->max_width,
                      ", tallest ", m.image_bound->max_height, ")");
}
}  // namespace

PipelineCore::PipelineCore(const Dataset* dataset, const PipelineOptions& options)
    : dataset_(dataset), opt_(options) {}

PipelineCore::~PipelineCore() {
  Shutdown();
  GivePoolsBack();
}

// Pools come from the options' PoolCache when it holds ones of the same shape (a Loader's
// previous pass), so a pass does not allocate and page-fault its buffers again.
absl::Status PipelineCore::TakePools() {
  PoolCache* cache = opt_.resources.pool_cache.get();
  if (cache != nullptr) {
    pool_ =
        cache->TakeBatchPool(opt_.resources.pool_size, batch_buffer_bytes_, opt_.placement.device);
    frame_buffers_ = cache->TakeFramePool(max_raw_frame_);
    stored_buffers_ = cache->TakeFramePool(max_stored_frame_);
  }
  if (pool_ == nullptr) {
    ASSIGN_OR_RETURN(pool_, PinnedBufferPool::Create(opt_.resources.pool_size, batch_buffer_bytes_,
                                                     opt_.placement.device));
  }
  if (frame_buffers_ == nullptr) frame_buffers_ = std::make_unique<FrameBufferPool>(max_raw_frame_);
  if (stored_buffers_ == nullptr) {
    stored_buffers_ = std::make_unique<FrameBufferPool>(max_stored_frame_);
  }
  return absl::OkStatus();
}

// After Shutdown the graph runs nothing and no lease is alive (a lease holds this core), so a
// pool with every buffer back is idle for good and can serve the next pipeline. A pool with a
// buffer still held (a pass cut short, messages not yet destroyed) stays here and dies with us.
void PipelineCore::GivePoolsBack() {
  PoolCache* cache = opt_.resources.pool_cache.get();
  if (cache == nullptr) return;
  if (pool_ != nullptr && pool_->in_use() == 0) {
    cache->GiveBatchPool(std::move(pool_), opt_.placement.device);
  }
  for (std::unique_ptr<FrameBufferPool>* frames : {&frame_buffers_, &stored_buffers_}) {
    if (*frames != nullptr && (*frames)->free_buffers() == (*frames)->allocated()) {
      cache->GiveFramePool(std::move(*frames));
    }
  }
}

absl::Status PipelineCore::BuildLayout() {
  const Manifest& m = dataset_->manifest();
  spec_ = dataset_->spec();
  RETURN_IF_ERROR(dataset_->OpenAllShards());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    ASSIGN_OR_RETURN(const ShardReader* r, dataset_->shard(i));
    readers_.push_back(r);
    for (uint32_t f = 0; f < r->frame_count(); ++f) {
      const FrameInfo& fi = r->frames()[f];
      max_raw_frame_ = std::max<size_t>(max_raw_frame_, fi.raw_size);
      max_stored_frame_ = std::max<size_t>(max_stored_frame_, fi.stored_size);
      layout_.frames.push_back(FrameRef{static_cast<uint32_t>(i), f,
                                        m.shards[i].first_record + fi.first_record,
                                        fi.record_count});
    }
  }
  layout_.record_count = dataset_->record_count();
  return absl::OkStatus();
}

absl::Status PipelineCore::Init() {
  start_ns_ = NowNs();
  if (opt_.order.batch_size == 0) return absl::InvalidArgumentError("batch_size must be >= 1");
  const DataParallelSlice& slice = opt_.slice;
  if (slice.world_size == 0 || slice.rank >= slice.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data-parallel rank ", slice.rank, " is not below the world size ", slice.world_size));
  }
  batch_capacity_ = (opt_.order.batch_size + slice.world_size - 1) / slice.world_size;
  if (opt_.span.epochs == 0) return absl::InvalidArgumentError("epochs must be >= 1");
  if (opt_.resources.device_ring_depth == 0)
    return absl::InvalidArgumentError("device_ring_depth must be >= 1");
  if (opt_.resources.threads <= 0) opt_.resources.threads = UsableCores();
  if (opt_.resources.decompress_threads <= 0)
    opt_.resources.decompress_threads = opt_.resources.threads;
  if (opt_.resources.preprocess_threads <= 0)
    opt_.resources.preprocess_threads = opt_.resources.threads;
  RETURN_IF_ERROR(BuildLayout());
  RETURN_IF_ERROR(InitPreprocess());

  order_ =
      OrderOptions{opt_.order.seed,       opt_.order.shuffle,   opt_.order.shuffle_window_frames,
                   opt_.order.batch_size, opt_.order.drop_last, slice.rank,
                   slice.world_size};
  steps_per_epoch_ = StepsPerEpoch(layout_.record_count, order_);
  if (opt_.span.start_step > steps_per_epoch_) {
    return absl::InvalidArgumentError(absl::StrCat("start step ", opt_.span.start_step,
                                                   " is past the end of the epoch (",
                                                   steps_per_epoch_, " steps)"));
  }
  total_batches_ = steps_per_epoch_ * opt_.span.epochs - opt_.span.start_step;
  frame_budget_ = FramesAliveBound(layout_, order_) + opt_.resources.read_ahead_frames;
  tuning_concurrency_ = opt_.resources.read_concurrency == 0;
  read_concurrency_.store(tuning_concurrency_ ? kAutoReadConcurrencyStart
                                              : opt_.resources.read_concurrency);
  next_epoch_ = opt_.span.start_epoch;

  sample_region_ = (batch_sample_.bytes() * batch_capacity_ + kAlign - 1) / kAlign * kAlign;
  label_offset_ = sample_region_;
  record_id_offset_ = label_offset_ + 4 * size_t{batch_capacity_};
  batch_buffer_bytes_ = record_id_offset_ + 4 * size_t{batch_capacity_};
  if (opt_.resources.pool_size == 0) {
    opt_.resources.pool_size = AutoPoolSize(batch_capacity_, batch_buffer_bytes_, steps_per_epoch_,
                                            opt_.resources.preprocess_threads, opt_.span.epochs);
  }
  RETURN_IF_ERROR(TakePools());
  // At most 2 batches per preprocess thread dispatched and not started: a buffer is granted
  // when a thread will soon take its batch, so the pool's wait is a wait for a buffer.
  scheduler_.emplace(
      opt_.resources.pool_size, &cancelled_,
      [this](const ReadyBatch& r, int64_t now_ns) { DispatchBatch(r, now_ns); },
      2 * static_cast<uint64_t>(std::max(1, opt_.resources.preprocess_threads)));
  if (opt_.placement.device != nullptr) {
    ASSIGN_OR_RETURN(uploader_,
                     DeviceUploader::Create(opt_.placement.device, opt_.resources.device_ring_depth,
                                            sample_region_, 4 * size_t{batch_capacity_}));
    slot_record_ids_.resize(size_t{opt_.resources.device_ring_depth} * batch_capacity_);
    ring_.emplace(
        opt_.resources.device_ring_depth, &cancelled_,
        [this](const BatchMsg& m, uint32_t slot, int64_t waited_ns) {
          EnqueueUpload(m, slot, waited_ns);
        },
        [this](uint32_t slot, device::Stream* stream) {
          absl::Status s = uploader_->ReleaseSlot(slot, stream);
          if (!s.ok()) Fail(s);
        });
  }
  recorders_[Stage::kRead].Init(Stage::kRead, 1);
  recorders_[Stage::kDecompress].Init(Stage::kDecompress, opt_.resources.decompress_threads);
  recorders_[Stage::kDecode].Init(Stage::kDecode, opt_.resources.preprocess_threads);
  recorders_[Stage::kPreprocess].Init(Stage::kPreprocess, opt_.resources.preprocess_threads);
  recorders_[Stage::kPinnedWait].Init(Stage::kPinnedWait, 1);
  recorders_[Stage::kH2D].Init(Stage::kH2D, 1);
  recorders_[Stage::kDelivery].Init(Stage::kDelivery, 1);
  if (opt_.diagnostics.trace_capacity > 0)
    trace_ = std::make_unique<TraceBuffer>(opt_.diagnostics.trace_capacity);
  RETURN_IF_ERROR(BuildWhatIfCaches());

  if (total_batches_ == 0) {
    delivery_.End();
    return absl::OkStatus();
  }
  if (opt_.resources.raise_tbb_worker_limit) {
    worker_limit_ = std::make_unique<oneapi::tbb::global_control>(
        oneapi::tbb::global_control::max_allowed_parallelism, opt_.resources.threads + 1);
  }
  // No slot reserved for an external thread: the consumer never joins the arena, so all
  // `threads` slots are for workers, and without them execute() below would wait forever.
  RETURN_IF_ERROR(CheckPipelineThreadsCanStart(opt_.resources.threads));
  arena_ = std::make_unique<oneapi::tbb::task_arena>(opt_.resources.threads, 0);
  arena_->execute([this] { BuildGraph(); });
  return absl::OkStatus();
}

absl::Status PipelineCore::InitPreprocess() {
  ASSIGN_OR_RETURN(const ResolvedBatchFormat format,
                   ResolveBatchFormat(spec_, opt_.format, SettingNames::kPythonArguments,
                                      dataset_->manifest().image_bound));
  opt_.format.h2d_format = format.h2d_format;
  batch_sample_ = format.sample;
  if (format.chain == nullptr) {
    ASSIGN_OR_RETURN(SampleConverter conv,
                     SampleConverter::Create(spec_, opt_.format.h2d_format,
                                             opt_.format.normalization, opt_.format.layout));
    converter_.emplace(std::move(conv));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(ChainPreprocessor pre,
                   ChainPreprocessor::Create(spec_, format, opt_.format.normalization));
  preprocessor_.emplace(std::move(pre));
  const size_t ops = preprocessor_->chain().size();
  scratch_.resize(static_cast<size_t>(opt_.resources.preprocess_threads));
  for (uint32_t i = 0; i < scratch_.size(); ++i) {
    ScratchSlot& slot = scratch_[i];
    // Not zero-filled: a chain over encoded images sizes its scratch for the largest image
    // (the manifest's image_bound, else kDefaultMaxImageSide), and only the pages a sample
    // touches are committed.
    const size_t bytes = preprocessor_->scratch_bytes() + kAlign;
    slot.bytes.reset(new (std::nothrow) char[bytes]);
    if (slot.bytes == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the transforms' scratch of preprocess thread ", i + 1, " (", bytes,
                       " bytes, ", ScratchBoundText(*dataset_), ") could not be allocated",
                       spec_.encoded() ? "; leave such images out (sluice-shard create "
                                         "--max-image-pixels)"
                                       : ""));
    }
    const uintptr_t at = reinterpret_cast<uintptr_t>(slot.bytes.get());
    slot.aligned = slot.bytes.get() + (kAlign - at % kAlign) % kAlign;
    slot.op_ns.assign(ops, 0);
    scratch_free_.push_back(i);
  }
  op_ns_total_ = std::make_unique<std::atomic<int64_t>[]>(ops);
  for (size_t k = 0; k < ops; ++k) op_ns_total_[k].store(0);
  return absl::OkStatus();
}

// Checked once per process for the largest thread count asked so far: oneTBB keeps its
// workers for later pipelines.
absl::Status PipelineCore::CheckPipelineThreadsCanStart(int threads) {
  static std::atomic<int> checked{0};
  if (threads <= checked.load()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckThreadsCanStart(threads, "the pipeline's threads (--threads)"));
  int seen = checked.load();
  while (seen < threads && !checked.compare_exchange_weak(seen, threads)) {
  }
  return absl::OkStatus();
}

void PipelineCore::BuildGraph() {
  graph_ = std::make_unique<Graph>();
  Graph& g = *graph_;
  read_node_ = std::make_unique<flow::input_node<FrameMsg>>(
      g, [this](oneapi::tbb::flow_control& fc) { return ReadBody(fc); });
  budget_node_ = std::make_unique<flow::limiter_node<FrameMsg>>(g, frame_budget_);
  decompress_node_ = std::make_unique<flow::function_node<FrameMsg>>(
      g, opt_.resources.decompress_threads, [this](const FrameMsg& m) {
        DecompressBody(m);
        return flow::continue_msg();
      });
  // Assembly and delivery are short and the consumer may be waiting on them, while a frame's
  // decompression is long and only refills read-ahead: give the batch path priority, so a
  // free worker takes a ready batch before another frame (measured: without it, compute
  // starved behind queued decompress tasks with every stage far faster than compute).
  constexpr flow::node_priority_t kBatchPath = 1;
  // Host batches are delivered in order by the thread that built them (DeliverInOrder). Through
  // a sequencer and a deliver node, a worker that finished a batch went on to the next queued
  // one, and the ready batch waited until no assembly was left (measured: batch 0 of a pass
  // reached the consumer 20 ms after it was built, behind the other 7 batches of its frame).
  const bool in_order_here = uploader_ == nullptr;
  assemble_node_ = std::make_unique<flow::function_node<BatchMsg, BatchMsg>>(
      g, opt_.resources.preprocess_threads,
      [this, in_order_here](BatchMsg m) {
        BatchMsg built = AssembleBody(std::move(m));
        if (!in_order_here) return built;
        DeliverInOrder(std::move(built));
        return BatchMsg{};
      },
      flow::queueing(), kBatchPath);
  if (!in_order_here) {
    sequencer_node_ = std::make_unique<flow::sequencer_node<BatchMsg>>(
        g, [](const BatchMsg& m) -> size_t { return m.id; });
    deliver_node_ = std::make_unique<flow::function_node<BatchMsg>>(
        g, flow::serial,
        [this](const BatchMsg& m) {
          Deliver(m);
          return flow::continue_msg();
        },
        flow::queueing(), kBatchPath);
    upload_node_ = std::make_unique<UploadNode>(
        g, flow::serial,
        [this](const BatchMsg& m, UploadNode::gateway_type& gw) { UploadBody(m, gw); });
    gateway_ = &upload_node_->gateway();
    flow::make_edge(*assemble_node_, *sequencer_node_);
    flow::make_edge(*sequencer_node_, *upload_node_);
    flow::make_edge(*upload_node_, *deliver_node_);
  }
  flow::make_edge(*read_node_, *budget_node_);
  flow::make_edge(*budget_node_, *decompress_node_);
  read_node_->activate();
}
// ---------------------------------------------------------------------------------------------
// the consumer's side

absl::StatusOr<bool> PipelineCore::Next(
    BatchLease* lease, std::optional<std::chrono::steady_clock::time_point> deadline) {
  lease->Release();
  const uint32_t limit = uploader_ ? opt_.resources.device_ring_depth : opt_.resources.pool_size;
  BatchMsg m;
  DeliveryQueue::Wait wait;
  absl::StatusOr<bool> got = delivery_.Pop(limit, &m, &wait, deadline);
  if (wait.end_ns != 0) recorders_[Stage::kDelivery].AddWaitInput(wait.end_ns - wait.start_ns);
  if (!got.ok() || !*got) return got;
  const int64_t now = wait.end_ns;
  const BatchPayload& p = *m.payload;
  BatchView& v = lease->view_;
  v = BatchView{};
  v.sample = batch_sample_;
  // u8 batches leave the normalization to the consumer; f16/f32 batches come normalized.
  if (opt_.format.h2d_format == H2DFormat::kU8 && !opt_.format.normalization.is_identity()) {
    v.normalization = &opt_.format.normalization;
  }
  v.size = p.size;
  v.epoch = m.run->plan.epoch;
  v.step = m.run->plan.first_step + m.index;
  v.global_size = m.run->plan.batch_global_size[m.index];
  if (uploader_ != nullptr) {
    v.record_ids = slot_record_ids_.data() + size_t{p.device_slot} * batch_capacity_;
    v.samples = uploader_->slot_samples(p.device_slot);
    v.labels = uploader_->slot_labels(p.device_slot);
    v.on_device = true;
    v.ready_event = uploader_->ready_event(p.device_slot);
    // The copy's device time, on the host clock: the copy-stream track of the timeline.
    absl::StatusOr<std::pair<int64_t, int64_t>> copy = uploader_->CopySpan(p.device_slot);
    if (!copy.ok()) return copy.status();
    v.copy_start_ns = copy->first;
    v.copy_end_ns = copy->second;
    Record(Stage::kH2D, copy->first, copy->second, m.id, p.size,
           size_t{p.size} * (batch_sample_.bytes() + 4));
  } else {
    v.samples = p.samples;
    v.labels = p.labels;
    v.record_ids = p.record_ids;
  }
  lease->core_ = shared_from_this();
  lease->id_ = m.id;
  lease->handed_out_ns_ = now;
  return true;
}

void PipelineCore::ReleaseLease(uint64_t id, device::Stream* stream, int64_t handed_out_ns) {
  std::shared_ptr<BatchPayload> payload = delivery_.TakeLease(id);
  if (payload == nullptr) return;
  recorders_[Stage::kDelivery].AddItem(handed_out_ns, NowNs(), payload->size, 0);
  if (ring_) {
    ring_->Release(id, payload->device_slot, stream);
    return;
  }
  payload->buffer.Reset();
  OnPinnedReleased();
}

// ---------------------------------------------------------------------------------------------
// control and statistics

void PipelineCore::Fail(absl::Status s) {
  delivery_.Fail(std::move(s));  // before cancelled_: Next() reports the error, not kCancelled
  cancelled_.store(true, std::memory_order_release);
}

void PipelineCore::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  delivery_.Cancel();  // wakes Next()
}

void PipelineCore::Shutdown() {
  if (shutdown_done_) return;
  shutdown_done_ = true;
  Cancel();
  if (scheduler_) scheduler_->Shutdown();
  if (arena_ != nullptr && graph_ != nullptr) {
    arena_->execute([this] { graph_->wait_for_all(); });
  }
  if (ring_) ring_->Clear();
}

void PipelineCore::SetConsumerInSpan(bool in_span) {
  consumer_in_span_.store(in_span, std::memory_order_relaxed);
}

void PipelineCore::Record(Stage s, int64_t start, int64_t end, uint64_t id, uint64_t samples,
                          uint64_t bytes, int64_t cpu_ns) {
  // Outside the span first, so a reader that sees the item's samples sees it counted there too.
  if (!consumer_in_span_.load(std::memory_order_relaxed)) recorders_[s].AddOutsideSpan(samples);
  recorders_[s].AddItem(start, end, samples, bytes, cpu_ns);
  if (trace_) trace_->Add(TraceSpan{s, id, ThreadNumber(), start, end});
}

// A stage's wait-out is time it was held back by what follows it, never time spent working
// (docs/bottleneck.md, "Columns"): assemble by the pinned pool (the scheduler's
// blocked span), the upload by the device ring (the ring's blocked span), and decompress by
// the frame budget: it idles for want of frames while the reader is held back by the budget,
// so its idle time is split in the share of the reader's window that the budget held it.
void PipelineCore::SplitWaits(PipelineStats* st) const {
  const int64_t now = st->snapshot_ns;
  if (scheduler_) {
    const int64_t blocked = scheduler_->blocked_ns(now);
    st->stages[static_cast<int>(Stage::kPinnedWait)].wait_output_ns = blocked;
    SplitIdle(&st->stages[static_cast<int>(Stage::kPreprocess)], blocked);
  }
  if (ring_) SplitIdle(&st->stages[static_cast<int>(Stage::kH2D)], ring_->blocked_ns(now));
  const StageStats& read = st->stages[static_cast<int>(Stage::kRead)];
  StageStats& decompress = st->stages[static_cast<int>(Stage::kDecompress)];
  const int64_t read_window = read.last_end_ns - read.first_start_ns;
  const double held = read_window > 0 ? std::min(1.0, static_cast<double>(read.wait_output_ns) /
                                                          static_cast<double>(read_window))
                                      : 0.0;
  SplitIdle(&decompress,
            static_cast<int64_t>(
                held * static_cast<double>(decompress.last_end_ns - decompress.first_start_ns)));
}

PipelineStats PipelineCore::Stats() const {
  PipelineStats st;
  for (int i = 0; i < kNumPipelineStages; ++i)
    st.stages[i] = recorders_.Snapshot(static_cast<Stage>(i));
  st.stages[static_cast<int>(Stage::kPinnedWait)].queue_high_water =
      pool_ ? pool_->high_water() : 0;
  st.start_ns = start_ns_;
  st.snapshot_ns = NowNs();
  SplitWaits(&st);
  st.threads = opt_.resources.threads;
  st.frames_read = frames_read_.load(std::memory_order_relaxed);
  st.frames_decoded = frames_decoded_.load(std::memory_order_relaxed);
  st.decode_stored_bytes = decode_stored_bytes_.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(decode_fit_mu_);
    st.decode_cost_fit = decode_fit_;
  }
  st.skipped_frames = skipped_frames_.load(std::memory_order_relaxed);
  st.skipped_records = skipped_records_.load(std::memory_order_relaxed);
  st.empty_batches = empty_batches_.load(std::memory_order_relaxed);
  st.pool_buffers = opt_.resources.pool_size;
  st.read_concurrency = read_concurrency_.load(std::memory_order_relaxed);
  st.read_concurrency_tuned = opt_.resources.read_concurrency == 0;
  st.frame_budget = frame_budget_ + 1;  // + the frame the reader holds while the limiter is full
  st.ring_depth = uploader_ ? opt_.resources.device_ring_depth : 0;
  st.pool_bytes = pool_ ? uint64_t{pool_->count()} * pool_->buffer_bytes() : 0;
  st.frame_buffer_bytes =
      frame_buffers_ ? frame_buffers_->allocated() * frame_buffers_->buffer_bytes() : 0;
  st.stored_buffer_bytes =
      stored_buffers_ ? stored_buffers_->allocated() * stored_buffers_->buffer_bytes() : 0;
  st.trace_dropped = trace_ ? trace_->dropped() : 0;
  DeliveryQueue::Counters delivered = delivery_.counters();
  st.batches_delivered = delivered.batches_delivered;
  st.samples_delivered = delivered.samples_delivered;
  st.corrupt_frames = std::move(delivered.corrupt_messages);
  if (preprocessor_.has_value()) {
    const TransformChain& chain = preprocessor_->chain();
    for (size_t k = 0; k < chain.size(); ++k) {
      st.chain_ops.push_back(
          {chain.op(k).Identity(), op_ns_total_[k].load(std::memory_order_relaxed)});
    }
    st.chain_timed_samples = chain_timed_samples_.load(std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> lock(epoch_reads_mu_);
    st.epoch_reads = epoch_reads_;
  }
  return st;
}

}  // namespace sluice::pipeline_internal
