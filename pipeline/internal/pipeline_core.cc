// The flow graph. Why each node is serial or parallel:
//  - read (input_node): serial by construction; one sequential pread stream per run is what
//    local disks and page caches like, and it keeps the read order (= the planned order) simple.
//    Read-ahead is bounded by the limiter_node behind it (the frame budget).
//  - decompress (function_node, decompress_threads): frames are independent; zstd is the most
//    CPU-hungry stage, so it runs in parallel with a ZSTD_DCtx per thread.
//  - assemble+preprocess (function_node, preprocess_threads): batches are independent once
//    their frames are decoded and they hold a buffer; parallel.
//  - sequencer_node: restores batch-id order after the parallel stages.
//  - upload (async_node, serial): copies must be enqueued in order on one copy stream; the
//    body only enqueues, the CUDA host callback completes through the gateway.
//  - deliver (function_node, serial): appends to the consumer's queue in order.
#include "pipeline/internal/pipeline_core.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/limits.h"
#include "common/status_macros.h"

#if defined(SLUICE_DEVICE_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace sluice::pipeline_internal {

namespace {
// An NVTX range around each stage body, so Nsight Systems shows the pipeline's stages on the
// same timeline as the CUDA streams (CUDA builds only; nvtx3 is header-only).
struct StageRange {
#if defined(SLUICE_DEVICE_CUDA)
  explicit StageRange(const char* name) { nvtxRangePushA(name); }
  ~StageRange() { nvtxRangePop(); }
#else
  explicit StageRange(const char*) {}
#endif
  StageRange(const StageRange&) = delete;
  StageRange& operator=(const StageRange&) = delete;
};
}  // namespace

namespace flow = oneapi::tbb::flow;

namespace {
struct ThreadDctx {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~ThreadDctx() { ZSTD_freeDCtx(ctx); }
};
void* ThisThreadDctx() {
  thread_local ThreadDctx d;
  return d.ctx;
}
constexpr size_t kAlign = 64;
constexpr uint32_t kGatherAhead = 4;  // records prefetched ahead of the gather
}  // namespace

PipelineCore::PipelineCore(const Dataset* dataset, const PipelineOptions& options)
    : dataset_(dataset), opt_(options) {}

PipelineCore::~PipelineCore() { Shutdown(); }

absl::Status PipelineCore::BuildLayout() {
  const Manifest& m = dataset_->manifest();
  spec_ = dataset_->spec();
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
    return absl::InvalidArgumentError(absl::StrCat("data-parallel rank ", slice.rank,
                                                   " is not below the world size ",
                                                   slice.world_size));
  }
  batch_capacity_ = (opt_.order.batch_size + slice.world_size - 1) / slice.world_size;
  if (opt_.resources.pool_size == 0) {
    opt_.resources.pool_size = std::clamp<uint32_t>((kAutoPoolSamples + batch_capacity_ - 1) / batch_capacity_, 4, 256);
  }
  if (opt_.span.epochs == 0) return absl::InvalidArgumentError("epochs must be >= 1");
  if (opt_.resources.device_ring_depth == 0) return absl::InvalidArgumentError("device_ring_depth must be >= 1");
  if (opt_.resources.threads <= 0) opt_.resources.threads = UsableCores();
  if (opt_.resources.decompress_threads <= 0) opt_.resources.decompress_threads = opt_.resources.threads;
  if (opt_.resources.preprocess_threads <= 0) opt_.resources.preprocess_threads = opt_.resources.threads;
  RETURN_IF_ERROR(BuildLayout());
  ASSIGN_OR_RETURN(SampleConverter conv,
                   SampleConverter::Create(spec_.sample_dtype, opt_.format.h2d_format,
                                           opt_.format.normalization, spec_.sample_values()));
  converter_.emplace(conv);

  order_ = OrderOptions{opt_.order.seed,      opt_.order.shuffle, opt_.order.shuffle_window_frames,
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
  next_epoch_ = opt_.span.start_epoch;

  sample_region_ = (converter_->out_bytes_per_sample() * batch_capacity_ + kAlign - 1) / kAlign * kAlign;
  label_offset_ = sample_region_;
  record_id_offset_ = label_offset_ + 4 * size_t{batch_capacity_};
  batch_buffer_bytes_ = record_id_offset_ + 4 * size_t{batch_capacity_};
  ASSIGN_OR_RETURN(pool_, PinnedBufferPool::Create(opt_.resources.pool_size, batch_buffer_bytes_,
                                                   opt_.placement.device));
  frame_buffers_.emplace(max_raw_frame_);
  stored_buffers_.emplace(max_stored_frame_);
  scheduler_.emplace(opt_.resources.pool_size, &cancelled_,
                     [this](const ReadyBatch& r, int64_t now_ns) { DispatchBatch(r, now_ns); });
  if (opt_.placement.device != nullptr) {
    ASSIGN_OR_RETURN(uploader_, DeviceUploader::Create(opt_.placement.device,
                                                       opt_.resources.device_ring_depth,
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
  recorders_[Stage::kPreprocess].Init(Stage::kPreprocess, opt_.resources.preprocess_threads);
  recorders_[Stage::kPinnedWait].Init(Stage::kPinnedWait, 1);
  recorders_[Stage::kH2D].Init(Stage::kH2D, 1);
  recorders_[Stage::kDelivery].Init(Stage::kDelivery, 1);
  if (opt_.diagnostics.trace_capacity > 0) trace_ = std::make_unique<TraceBuffer>(opt_.diagnostics.trace_capacity);
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
  // `threads` slots are for workers.
  arena_ = std::make_unique<oneapi::tbb::task_arena>(opt_.resources.threads, 0);
  arena_->execute([this] { BuildGraph(); });
  return absl::OkStatus();
}

absl::Status PipelineCore::BuildWhatIfCaches() {
  const WhatIf w = opt_.diagnostics.what_if;
  if (w == WhatIf::kNone || w == WhatIf::kH2D) return absl::OkStatus();
  const size_t f = layout_.frames.size();
  if (w == WhatIf::kRead) {
    stored_cache_.resize(f);
    for (size_t i = 0; i < f; ++i) {
      const FrameRef& fr = layout_.frames[i];
      RETURN_IF_ERROR(readers_[fr.shard]->ReadStoredFrame(fr.frame, &stored_cache_[i]));
    }
    return absl::OkStatus();
  }
  // kDecompress and kPreprocess need decoded frames.
  decoded_cache_.resize(f);
  decoded_corrupt_.assign(f, 0);
  std::string stored;
  for (size_t i = 0; i < f; ++i) {
    const FrameRef& fr = layout_.frames[i];
    const ShardReader* r = readers_[fr.shard];
    RETURN_IF_ERROR(r->ReadStoredFrame(fr.frame, &stored));
    decoded_cache_[i].resize(r->frames()[fr.frame].raw_size);
    absl::Status s = r->DecodeFrame(fr.frame, stored,
                                    absl::MakeSpan(decoded_cache_[i].data(), decoded_cache_[i].size()),
                                    ThisThreadDctx());
    if (!s.ok()) {
      if (opt_.on_corrupt == OnCorrupt::kSkip && absl::IsDataLoss(s)) {
        decoded_corrupt_[i] = 1;
        decoded_cache_[i].clear();
      } else {
        return s;
      }
    }
  }
  if (w == WhatIf::kDecompress) return absl::OkStatus();
  // kPreprocess: build every batch of the start epoch now.
  ASSIGN_OR_RETURN(EpochPlan plan, PlanEpoch(layout_, order_, opt_.span.start_epoch, opt_.span.start_step));
  EpochRun run;
  run.frames.resize(plan.read_frames.size());
  for (size_t s = 0; s < plan.read_frames.size(); ++s) {
    const uint32_t g = plan.read_frames[s];
    run.frames[s].data = decoded_cache_[g].data();
    run.frames[s].records = layout_.frames[g].record_count;
    run.frames[s].corrupt = decoded_corrupt_[g] != 0;
  }
  run.plan = std::move(plan);
  prebuilt_first_step_ = opt_.span.start_step;
  const uint32_t nb = run.plan.num_batches();
  prebuilt_.resize(nb);
  prebuilt_size_.resize(nb);
  for (uint32_t b = 0; b < nb; ++b) {
    prebuilt_[b].resize(batch_buffer_bytes_);
    GatherInto(run, b, prebuilt_[b].data(),
               reinterpret_cast<int32_t*>(prebuilt_[b].data() + label_offset_),
               reinterpret_cast<uint32_t*>(prebuilt_[b].data() + record_id_offset_),
               &prebuilt_size_[b]);
  }
  decoded_cache_.clear();  // the prebuilt batches are all assemble needs
  decoded_corrupt_.clear();
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
  assemble_node_ = std::make_unique<flow::function_node<BatchMsg, BatchMsg>>(
      g, opt_.resources.preprocess_threads, [this](BatchMsg m) { return AssembleBody(std::move(m)); },
      flow::queueing(), kBatchPath);
  sequencer_node_ = std::make_unique<flow::sequencer_node<BatchMsg>>(
      g, [](const BatchMsg& m) -> size_t { return m.id; });
  deliver_node_ = std::make_unique<flow::function_node<BatchMsg>>(
      g, flow::serial,
      [this](const BatchMsg& m) {
        Deliver(m);
        return flow::continue_msg();
      },
      flow::queueing(), kBatchPath);
  flow::make_edge(*read_node_, *budget_node_);
  flow::make_edge(*budget_node_, *decompress_node_);
  flow::make_edge(*assemble_node_, *sequencer_node_);
  if (uploader_ != nullptr) {
    upload_node_ = std::make_unique<UploadNode>(
        g, flow::serial,
        [this](const BatchMsg& m, UploadNode::gateway_type& gw) { UploadBody(m, gw); });
    gateway_ = &upload_node_->gateway();
    flow::make_edge(*sequencer_node_, *upload_node_);
    flow::make_edge(*upload_node_, *deliver_node_);
  } else {
    flow::make_edge(*sequencer_node_, *deliver_node_);
  }
  read_node_->activate();
}

// ---------------------------------------------------------------------------------------------
// read

bool PipelineCore::AdvanceEpoch() {
  while (reading_ == nullptr || next_slot_ >= reading_->plan.read_frames.size()) {
    if (next_epoch_ >= opt_.span.start_epoch + opt_.span.epochs) return false;
    const uint64_t e = next_epoch_++;
    const uint64_t first = e == opt_.span.start_epoch ? opt_.span.start_step : 0;
    absl::StatusOr<EpochPlan> plan = PlanEpoch(layout_, order_, e, first);
    if (!plan.ok()) {
      Fail(plan.status());
      return false;
    }
    if (plan->min_frames_alive > frame_budget_) {
      Fail(absl::InternalError(absl::StrCat("frame budget ", frame_budget_, " below the ",
                                            plan->min_frames_alive, " frames epoch ", e, " needs")));
      return false;
    }
    auto run = std::make_shared<EpochRun>();
    run->plan = *std::move(plan);
    const uint32_t slots = static_cast<uint32_t>(run->plan.read_frames.size());
    const uint32_t nb = run->plan.num_batches();
    run->first_batch_id = next_batch_id_;
    run->first_frame_seq = next_frame_seq_;
    next_batch_id_ += nb;
    next_frame_seq_ += slots;
    run->frames.resize(slots);
    run->slot_refs = std::make_unique<std::atomic<uint32_t>[]>(slots);
    for (uint32_t s = 0; s < slots; ++s) {
      run->slot_refs[s].store(run->plan.slot_batch_begin[s + 1] - run->plan.slot_batch_begin[s],
                              std::memory_order_relaxed);
    }
    run->batch_missing = std::make_unique<std::atomic<uint32_t>[]>(nb);
    std::vector<ReadyBatch> frameless;  // planned empty (data parallel): no frame completes them
    for (uint32_t b = 0; b < nb; ++b) {
      const uint32_t frames = run->plan.batch_slot_begin[b + 1] - run->plan.batch_slot_begin[b];
      run->batch_missing[b].store(frames, std::memory_order_relaxed);
      if (frames == 0) frameless.push_back(ReadyBatch{run->first_batch_id + b, NowNs(), run, b});
    }
    if (!frameless.empty()) scheduler_->AddReady(&frameless);
    reading_ = std::move(run);
    next_slot_ = 0;
  }
  return true;
}

FrameMsg PipelineCore::ReadBody(oneapi::tbb::flow_control& fc) {
  StageRange nvtx_range("sluice read");
  int64_t start = NowNs();
  // The gap since the previous item is time the frame budget (limiter) held the reader back.
  if (read_last_end_ns_ != 0) recorders_[Stage::kRead].AddWaitOutput(start - read_last_end_ns_);
  if (cancelled() || !AdvanceEpoch()) {
    fc.stop();
    return FrameMsg{};
  }
  start = NowNs();  // planning an epoch is not read time
  FrameMsg m;
  m.run = reading_;
  m.slot = next_slot_++;
  m.seq = reading_->first_frame_seq + m.slot;
  m.is_last = m.seq + 1 == next_frame_seq_ && next_epoch_ == opt_.span.start_epoch + opt_.span.epochs;
  const uint32_t g = reading_->plan.read_frames[m.slot];
  const FrameRef& fr = layout_.frames[g];
  uint64_t bytes = 0;
  if (stored_cache_.empty()) {
    m.stored = std::make_shared<StoredFrame>();
    m.stored->bytes = stored_buffers_->Take();
    m.stored->size = readers_[fr.shard]->frames()[fr.frame].stored_size;
    absl::Status s = readers_[fr.shard]->ReadStoredFrame(
        fr.frame, absl::MakeSpan(m.stored->bytes.get(), m.stored->size));
    if (!s.ok()) {
      Fail(s);
      fc.stop();
      return FrameMsg{};
    }
    bytes = m.stored->size;
  } else {
    bytes = stored_cache_[g].size();
  }
  // A slow read is I/O latency, not CPU work: the injected read delay sleeps (the other
  // stages' delays spin, as the CPU work they stand for would).
  if (const int64_t us = opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kRead)]; us > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  const int64_t end = NowNs();
  read_last_end_ns_ = end;
  frames_read_.fetch_add(1, std::memory_order_relaxed);
  recorders_[Stage::kRead].NoteQueue(frames_resident_.fetch_add(1, std::memory_order_relaxed) + 1);
  recorders_[Stage::kDecompress].NoteQueue(frames_queued_.fetch_add(1, std::memory_order_relaxed) + 1);
  Record(Stage::kRead, start, end, m.seq, fr.record_count, bytes);
  return m;
}

// ---------------------------------------------------------------------------------------------
// decompress

void PipelineCore::DecompressBody(const FrameMsg& m) {
  StageRange nvtx_range("sluice decompress");
  frames_queued_.fetch_sub(1, std::memory_order_relaxed);
  // The stored bytes go back to their pool when this body is done with them, on every path
  // (decoded, corrupt, what-if decompress, cancelled).
  absl::Cleanup return_stored = [this, &m] {
    if (m.stored) stored_buffers_->Return(std::move(m.stored->bytes));
  };
  if (cancelled() || m.run == nullptr) return;
  const int64_t start = NowNs();
  EpochRun& run = *m.run;
  const uint32_t g = run.plan.read_frames[m.slot];
  const FrameRef& fr = layout_.frames[g];
  const ShardReader* reader = readers_[fr.shard];
  DecodedFrame& out = run.frames[m.slot];
  out.records = fr.record_count;
  absl::Status s;
  if (!decoded_cache_.empty()) {  // what-if decompress
    out.corrupt = decoded_corrupt_[g] != 0;
    out.data = decoded_cache_[g].data();
  } else {
    const uint32_t raw = reader->frames()[fr.frame].raw_size;
    out.owned = frame_buffers_->Take();
    const absl::string_view stored =
        m.stored ? absl::string_view(m.stored->bytes.get(), m.stored->size) : stored_cache_[g];
    s = reader->DecodeFrame(fr.frame, stored, absl::MakeSpan(out.owned.get(), raw),
                            ThisThreadDctx());
    out.data = out.owned.get();
  }
  if (!s.ok()) {
    if (opt_.on_corrupt == OnCorrupt::kSkip && absl::IsDataLoss(s)) {
      out.corrupt = true;
      frame_buffers_->Return(std::move(out.owned));
      out.data = nullptr;
      delivery_.AddCorruptMessage(s.message());
    } else {
      Fail(s);
      return;
    }
  }
  if (!out.corrupt) frames_decoded_.fetch_add(1, std::memory_order_relaxed);
  if (out.corrupt) {
    skipped_frames_.fetch_add(1, std::memory_order_relaxed);
    uint64_t used = 0;  // records of this frame that a planned batch would have held
    for (uint32_t i = 0; i < run.plan.sample_slot.size(); ++i) used += run.plan.sample_slot[i] == m.slot;
    skipped_records_.fetch_add(used, std::memory_order_relaxed);
  }
  SpinFor(opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kDecompress)]);
  const int64_t end = NowNs();
  Record(Stage::kDecompress, start, end, m.seq, fr.record_count,
         reader->frames()[fr.frame].raw_size);
  OnFrameReady(m.run, m.slot);
}

// ---------------------------------------------------------------------------------------------
// scheduler

void PipelineCore::OnFrameReady(const std::shared_ptr<EpochRun>& run, uint32_t slot) {
  // Reused by each decompress thread, so the batches a frame completes cost no allocation.
  thread_local std::vector<ReadyBatch> ready;
  const int64_t now = NowNs();
  const EpochPlan& plan = run->plan;
  for (uint32_t j = plan.slot_batch_begin[slot]; j < plan.slot_batch_begin[slot + 1]; ++j) {
    const uint32_t b = plan.slot_batches[j];
    // acq_rel: whoever completes a batch sees every frame of it (see EpochRun).
    if (run->batch_missing[b].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      ready.push_back(ReadyBatch{run->first_batch_id + b, now, run, b});
    }
  }
  // No new ready batch: nothing the scheduler could dispatch changed, so it is not asked.
  if (ready.empty()) return;
  const size_t waiting = scheduler_->AddReady(&ready);
  if (waiting > 0) recorders_[Stage::kPreprocess].NoteQueue(static_cast<int64_t>(waiting));
}

void PipelineCore::DispatchBatch(const ReadyBatch& r, int64_t now_ns) {
  const int64_t waited = now_ns - r.ready_ns;
  if (waited > 0) {
    recorders_[Stage::kPinnedWait].AddItem(
        r.ready_ns, now_ns, r.run->plan.batch_end(r.index) - r.run->plan.batch_begin(r.index), 0);
    recorders_[Stage::kPreprocess].AddWaitOutput(waited);
  }
  BatchMsg m;
  m.run = r.run;
  m.index = r.index;
  m.id = r.id;
  m.is_last = r.id + 1 == total_batches_;
  assemble_node_->try_put(m);  // only spawns or queues a task: never runs assemble inline
}

// ---------------------------------------------------------------------------------------------
// assemble + preprocess

void PipelineCore::GatherInto(const EpochRun& run, uint32_t index, char* samples,
                              int32_t* labels, uint32_t* record_ids, uint32_t* size) const {
  const EpochPlan& plan = run.plan;
  const size_t out_bytes = converter_->out_bytes_per_sample();
  const size_t in_bytes = converter_->in_bytes_per_sample();
  const uint32_t end = plan.batch_end(index);
  uint32_t k = 0;
  for (uint32_t i = plan.batch_begin(index); i < end; ++i) {
    // The records come from frames decoded long before, spread over the shuffle window (tens
    // of MB): each one starts with cache misses. Asking for the record kGatherAhead places on
    // now overlaps those misses with this record's copy (a random 784-byte copy from a 14 MB
    // window: 249 ns without, 105 ns with, on the 2-vCPU EPYC; BM_Memory_RecordCopy).
    if (i + kGatherAhead < end) {
      const DecodedFrame& ahead = run.frames[plan.sample_slot[i + kGatherAhead]];
      if (ahead.data != nullptr) {
        const char* p = ahead.data + size_t{plan.sample_offset[i + kGatherAhead]} * in_bytes;
        for (size_t line = 0; line < in_bytes; line += 64) __builtin_prefetch(p + line);
      }
    }
    const DecodedFrame& fr = run.frames[plan.sample_slot[i]];
    if (fr.corrupt) continue;  // skip policy: the sample is dropped, others keep their place
    GatherRecord(*converter_, spec_.label_dtype, fr.data, fr.records, plan.sample_offset[i],
                 samples + size_t{k} * out_bytes, labels + k);
    record_ids[k] = plan.order[i];
    ++k;
  }
  *size = k;
}

BatchMsg PipelineCore::AssembleBody(BatchMsg m) {
  StageRange nvtx_range("sluice preprocess");
  if (cancelled()) return m;
  const int64_t start = NowNs();
  EpochRun& run = *m.run;
  auto payload = std::make_shared<BatchPayload>();
  std::optional<PinnedBuffer> buf = pool_->TryAcquire();
  if (!buf.has_value()) {  // cannot happen: the scheduler grants buffers before dispatching
    Fail(absl::InternalError("pinned buffer pool exhausted despite the scheduler's grant"));
    return m;
  }
  payload->buffer = std::move(*buf);
  recorders_[Stage::kPinnedWait].NoteQueue(pool_->in_use());
  if (!prebuilt_.empty()) {  // what-if preprocess
    const uint64_t step = (run.plan.first_step + m.index - prebuilt_first_step_) % prebuilt_.size();
    payload->samples = prebuilt_[step].data();
    payload->labels = reinterpret_cast<const int32_t*>(prebuilt_[step].data() + label_offset_);
    payload->record_ids = reinterpret_cast<const uint32_t*>(prebuilt_[step].data() + record_id_offset_);
    payload->size = prebuilt_size_[step];
  } else {
    char* base = payload->buffer.data();
    GatherInto(run, m.index, base, reinterpret_cast<int32_t*>(base + label_offset_),
               reinterpret_cast<uint32_t*>(base + record_id_offset_), &payload->size);
    payload->samples = base;
    payload->labels = reinterpret_cast<const int32_t*>(base + label_offset_);
    payload->record_ids = reinterpret_cast<const uint32_t*>(base + record_id_offset_);
  }
  // Drop this batch's references; the last batch needing a frame frees it and returns its
  // place in the frame budget to the reader.
  const EpochPlan& plan = run.plan;
  for (uint32_t j = plan.batch_slot_begin[m.index]; j < plan.batch_slot_begin[m.index + 1]; ++j) {
    const uint32_t s = plan.batch_slots[j];
    if (run.slot_refs[s].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      frame_buffers_->Return(std::move(run.frames[s].owned));
      run.frames[s].data = nullptr;
      frames_resident_.fetch_sub(1, std::memory_order_relaxed);
      budget_node_->decrementer().try_put(flow::continue_msg());
    }
  }
  SpinFor(opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kPreprocess)]);
  const int64_t end = NowNs();
  Record(Stage::kPreprocess, start, end, m.id, payload->size,
         size_t{payload->size} * converter_->out_bytes_per_sample());
  m.payload = std::move(payload);
  return m;
}

// ---------------------------------------------------------------------------------------------
// upload (device placement) and delivery

void PipelineCore::UploadBody(const BatchMsg& m, UploadNode::gateway_type& gw) {
  StageRange nvtx_range("sluice h2d enqueue");
  if (cancelled() || m.payload == nullptr) return;
  // An all-skipped batch (size 0) goes through the ring and the copy stream too, copying
  // nothing: it must not overtake earlier batches still waiting for a slot, or its end-of-run
  // flag would reach the delivery queue before them.
  // Enqueued now (under the ring's lock) or by the consumer's release that frees its slot.
  const size_t waiting = ring_->Submit(m);
  if (waiting > 0) recorders_[Stage::kH2D].NoteQueue(static_cast<int64_t>(waiting));
}

void PipelineCore::EnqueueUpload(const BatchMsg& m, uint32_t slot, int64_t waited_ns) {
  if (waited_ns > 0) recorders_[Stage::kH2D].AddWaitOutput(waited_ns);
  m.payload->device_slot = slot;
  // The slot's previous batch was released, so its record ids are free; the pinned buffer
  // holding this batch's ids goes back when the copy completes.
  std::copy_n(m.payload->record_ids, m.payload->size,
              slot_record_ids_.begin() + size_t{slot} * batch_capacity_);
  gateway_->reserve_wait();  // keeps the graph alive until the copy completes
  const size_t sample_bytes = size_t{m.payload->size} * converter_->out_bytes_per_sample();
  absl::Status s = uploader_->Enqueue(
      slot, m.payload->samples, sample_bytes, m.payload->labels, 4 * size_t{m.payload->size},
      opt_.diagnostics.what_if == WhatIf::kH2D || m.payload->size == 0,
      m.payload->size > 0 ? opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kH2D)] : 0,
      [this, m] {
        // A device platform thread: no device calls here. The pinned buffer goes back now.
        BatchMsg done = m;
        done.payload->buffer.Reset();
        OnPinnedReleased();
        gateway_->try_put(done);
        gateway_->release_wait();
      });
  if (!s.ok()) {
    gateway_->release_wait();
    Fail(s);
  }
}

void PipelineCore::Deliver(const BatchMsg& m) {
  StageRange nvtx_range("sluice deliver");
  if (cancelled() || m.payload == nullptr) return;
  // One process: a batch all of whose samples were skipped as corrupt is not delivered. Data
  // parallel: every step is delivered, empty or not, so that all ranks stay in lockstep.
  const bool empty = m.payload->size == 0 && opt_.slice.world_size == 1;
  if (empty) {
    empty_batches_.fetch_add(1, std::memory_order_relaxed);
    m.payload->buffer.Reset();
    OnPinnedReleased();
    if (ring_) ring_->Release(m.id, m.payload->device_slot, nullptr);
  }
  const size_t queued = delivery_.Push(m, /*append=*/!empty);
  if (!empty) recorders_[Stage::kDelivery].NoteQueue(static_cast<int64_t>(queued));
}

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
  v.format = opt_.format.h2d_format;
  v.size = p.size;
  v.features = static_cast<uint32_t>(spec_.sample_values());
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
    Record(Stage::kH2D, copy->first, copy->second, m.id, p.size,
           size_t{p.size} * (converter_->out_bytes_per_sample() + 4));
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

void PipelineCore::Record(Stage s, int64_t start, int64_t end, uint64_t id, uint64_t samples,
                          uint64_t bytes) {
  recorders_[s].AddItem(start, end, samples, bytes);
  if (trace_) trace_->Add(TraceSpan{s, id, ThreadNumber(), start, end});
}

PipelineStats PipelineCore::Stats() const {
  PipelineStats st;
  for (int i = 0; i < kNumPipelineStages; ++i) st.stages[i] = recorders_.Snapshot(static_cast<Stage>(i));
  st.stages[static_cast<int>(Stage::kPinnedWait)].queue_high_water = pool_ ? pool_->high_water() : 0;
  st.start_ns = start_ns_;
  st.snapshot_ns = NowNs();
  st.threads = opt_.resources.threads;
  st.frames_read = frames_read_.load(std::memory_order_relaxed);
  st.frames_decoded = frames_decoded_.load(std::memory_order_relaxed);
  st.skipped_frames = skipped_frames_.load(std::memory_order_relaxed);
  st.skipped_records = skipped_records_.load(std::memory_order_relaxed);
  st.empty_batches = empty_batches_.load(std::memory_order_relaxed);
  st.pool_buffers = opt_.resources.pool_size;
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
  return st;
}

}  // namespace sluice::pipeline_internal
