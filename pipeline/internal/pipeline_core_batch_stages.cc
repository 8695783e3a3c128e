// PipelineCore's batch stages: the scheduler's side (a decoded frame completes batches, and a
// ready batch that gets a pinned buffer is dispatched to assemble), assemble + preprocess (the
// gather of a batch's records into its pinned buffer, converting each sample: the pipeline's
// hot loop, with convert.h's inline GatherRecord inlined into it), the upload through the
// device ring and the copy stream, and the delivery to the consumer's queue.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/printable.h"
#include "pipeline/internal/pipeline_core.h"
#include "pipeline/internal/stage_range.h"

namespace sluice::pipeline_internal {

namespace flow = oneapi::tbb::flow;

namespace {
constexpr uint32_t kGatherAhead = 4;  // records prefetched ahead of the gather
}  // namespace

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
  // Each batch's wait, summed over batches (several wait at once): pinned_wait's busy. The
  // assemble stage's own wait-out is the scheduler's blocked span (PipelineCore::Stats).
  if (waited > 0) {
    recorders_[Stage::kPinnedWait].AddItem(
        r.ready_ns, now_ns, r.run->plan.batch_end(r.index) - r.run->plan.batch_begin(r.index), 0);
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

void PipelineCore::GatherInto(const EpochRun& run, uint32_t index, char* samples, int32_t* labels,
                              uint32_t* record_ids, uint32_t* size) const {
  const EpochPlan& plan = run.plan;
  const size_t out_bytes = batch_sample_.bytes();
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
        const FrameView frame(spec_, ahead.records, ahead.data);
        const char* p = frame.sample(plan.sample_offset[i + kGatherAhead]);
        for (size_t line = 0; line < frame.sample_bytes(); line += 64) __builtin_prefetch(p + line);
      }
    }
    const DecodedFrame& fr = run.frames[plan.sample_slot[i]];
    if (fr.corrupt) continue;  // skip policy: the sample is dropped, others keep their place
    GatherRecord(*converter_, spec_.label_dtype, FrameView(spec_, fr.records, fr.data),
                 plan.sample_offset[i], samples + size_t{k} * out_bytes, labels + k);
    record_ids[k] = plan.order[i];
    ++k;
  }
  *size = k;
}

// The chain's path: the same walk as GatherInto's, each sample through the preprocessor with
// its key (seed, epoch, global position), so its random draws are those of its place in the
// epoch whatever thread, rank or start step builds it.
uint32_t PipelineCore::GatherThroughChain(const EpochRun& run, uint32_t index, char* samples,
                                          int32_t* labels, uint32_t* record_ids, uint32_t* size,
                                          char* scratch, int64_t* op_ns) {
  const EpochPlan& plan = run.plan;
  const size_t out_bytes = batch_sample_.bytes();
  const uint32_t end = plan.batch_end(index);
  uint32_t k = 0;
  uint32_t timed = 0;
  const int64_t decode_delay_us =
      opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kDecode)];
  for (uint32_t i = plan.batch_begin(index); i < end; ++i) {
    const DecodedFrame& fr = run.frames[plan.sample_slot[i]];
    if (fr.corrupt) continue;  // skip policy: the sample is dropped, others keep their place
    const FrameView frame(spec_, fr.records, fr.data);
    const uint32_t offset = plan.sample_offset[i];
    const uint64_t position = plan.sample_position[i];
    if (chain_free_count_ > 0) {  // what-if transforms: a prebuilt output instead of the chain
      std::memcpy(samples + size_t{k} * out_bytes,
                  chain_free_samples_.data() + (position % chain_free_count_) * out_bytes,
                  out_bytes);
      ConvertLabels(spec_.label_dtype, frame.label(offset), labels + k, 1);
      record_ids[k] = plan.order[i];
      ++k;
      continue;
    }
    const SampleKey key{opt_.order.seed, plan.epoch, position};
    absl::Status s;
    if (!decoded_images_.empty()) {  // what-if decode: a decoded image instead of the decode
      const DecodedImage& img = decoded_images_[position % decoded_images_.size()];
      s = preprocessor_->ProcessDecoded(img.spec, img.pixels.data(),
                                        samples + size_t{k} * out_bytes, key, scratch, op_ns);
    } else {
      DecodeTiming decode{.delay_us = decode_delay_us};
      s = preprocessor_->Process(frame.sample(offset), frame.sample_size(offset),
                                 samples + size_t{k} * out_bytes, key, scratch, op_ns, &decode);
      if (decode.start_ns != 0) {
        Record(Stage::kDecode, decode.start_ns, decode.end_ns, plan.order[i], 1, decode.bytes);
        decode_stored_bytes_.fetch_add(decode.stored_bytes, std::memory_order_relaxed);
        std::lock_guard<std::mutex> l(decode_fit_mu_);
        decode_fit_.Add(static_cast<double>(decode.stored_bytes),
                        static_cast<double>(decode.end_ns - decode.start_ns));
      }
    }
    // A refused record's ops are not all timed: it is not one of the timed samples, and its
    // attempt counts outside the chain.
    if (!s.ok() && !SkipCorruptRecord(run, i, s)) break;
    if (!s.ok()) continue;  // skip policy: the sample is dropped, others keep their place
    if (TransformChain::TimesSample(position)) ++timed;
    ConvertLabels(spec_.label_dtype, frame.label(offset), labels + k, 1);
    record_ids[k] = plan.order[i];
    ++k;
  }
  *size = k;
  return timed;
}

// A record the chain refused (an encoded image that does not decode): named by its shard file,
// its record id in the split, its source file when the manifest records one (record_sources,
// looked up only here, on the error path) and the reason. Skip policy: counted, and the gather
// goes on; fail policy: the run stops with that line.
bool PipelineCore::SkipCorruptRecord(const EpochRun& run, uint32_t i, const absl::Status& s) {
  const FrameRef& fr = layout_.frames[run.plan.read_frames[run.plan.sample_slot[i]]];
  const uint32_t record = run.plan.order[i];
  const std::vector<std::string>& sources = dataset_->manifest().record_sources;
  const std::string source =
      record < sources.size() ? absl::StrCat(" (", Printable(sources[record]), ")") : std::string();
  const absl::Status named(s.code(), absl::StrCat(readers_[fr.shard]->path(), ": record ", record,
                                                  source, ": ", s.message()));
  if (opt_.on_corrupt == OnCorrupt::kSkip && absl::IsDataLoss(s)) {
    skipped_records_.fetch_add(1, std::memory_order_relaxed);
    delivery_.AddCorruptMessage(named.message());
    return true;
  }
  Fail(named);
  return false;
}

uint32_t PipelineCore::AcquireScratch() {
  std::lock_guard<std::mutex> lock(scratch_mu_);
  // The assemble node runs at most preprocess_threads bodies at once, one slot each.
  const uint32_t slot = scratch_free_.back();
  scratch_free_.pop_back();
  return slot;
}

void PipelineCore::ReleaseScratch(uint32_t slot) {
  std::lock_guard<std::mutex> lock(scratch_mu_);
  scratch_free_.push_back(slot);
}

void PipelineCore::GatherBatch(const EpochRun& run, uint32_t index, char* base, uint32_t* size) {
  int32_t* labels = reinterpret_cast<int32_t*>(base + label_offset_);
  uint32_t* ids = reinterpret_cast<uint32_t*>(base + record_id_offset_);
  if (!preprocessor_.has_value()) {
    GatherInto(run, index, base, labels, ids, size);
    return;
  }
  const uint32_t slot = AcquireScratch();
  ScratchSlot& s = scratch_[slot];
  std::fill(s.op_ns.begin(), s.op_ns.end(), 0);
  const uint32_t timed =
      GatherThroughChain(run, index, base, labels, ids, size, s.aligned, s.op_ns.data());
  chain_timed_samples_.fetch_add(timed, std::memory_order_relaxed);
  for (size_t k = 0; k < s.op_ns.size(); ++k) {
    if (s.op_ns[k] != 0) op_ns_total_[k].fetch_add(s.op_ns[k], std::memory_order_relaxed);
  }
  ReleaseScratch(slot);
}

BatchMsg PipelineCore::AssembleBody(BatchMsg m) {
  scheduler_->Started();  // a thread took it: the scheduler may dispatch the next
  StageRange nvtx_range("sluice preprocess");
  if (cancelled()) return m;
  const int64_t start = NowNs();
  const CpuSample cpu(Stage::kPreprocess);
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
    payload->record_ids =
        reinterpret_cast<const uint32_t*>(prebuilt_[step].data() + record_id_offset_);
    payload->size = prebuilt_size_[step];
  } else {
    char* base = payload->buffer.data();
    GatherBatch(run, m.index, base, &payload->size);
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
         size_t{payload->size} * batch_sample_.bytes(), cpu.Elapsed());
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

// The batches' waits for a slot overlap; the upload stage's wait-out is the ring's blocked
// span (PipelineCore::Stats), so `waited_ns` is not summed here.
void PipelineCore::EnqueueUpload(const BatchMsg& m, uint32_t slot, int64_t /*waited_ns*/) {
  m.payload->device_slot = slot;
  // The slot's previous batch was released, so its record ids are free; the pinned buffer
  // holding this batch's ids goes back when the copy completes.
  std::copy_n(m.payload->record_ids, m.payload->size,
              slot_record_ids_.begin() + size_t{slot} * batch_capacity_);
  gateway_->reserve_wait();  // keeps the graph alive until the copy completes
  const size_t sample_bytes = size_t{m.payload->size} * batch_sample_.bytes();
  absl::Status s = uploader_->Enqueue(
      slot, m.payload->samples, sample_bytes, m.payload->labels, 4 * size_t{m.payload->size},
      opt_.diagnostics.what_if == Stage::kH2D || m.payload->size == 0,
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

void PipelineCore::DeliverInOrder(BatchMsg m) {
  std::lock_guard<std::mutex> l(in_order_mu_);
  if (m.id != next_to_deliver_) {
    built_ahead_.emplace(m.id, std::move(m));
    return;
  }
  // Under the lock: delivery stays serial and in id order.
  Deliver(m);
  ++next_to_deliver_;
  for (auto it = built_ahead_.begin(); it != built_ahead_.end() && it->first == next_to_deliver_;
       it = built_ahead_.erase(it)) {
    Deliver(it->second);
    ++next_to_deliver_;
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
    // An uploaded batch gave its buffer back when its copy completed (EnqueueUpload): return
    // it once, or the scheduler would count a buffer the pool does not have.
    if (m.payload->buffer.valid()) {
      m.payload->buffer.Reset();
      OnPinnedReleased();
    }
    if (ring_) ring_->Release(m.id, m.payload->device_slot, nullptr);
  }
  const size_t queued = delivery_.Push(m, /*append=*/!empty);
  if (!empty) recorders_[Stage::kDelivery].NoteQueue(static_cast<int64_t>(queued));
}

}  // namespace sluice::pipeline_internal
