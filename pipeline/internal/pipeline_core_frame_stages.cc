// PipelineCore's frame stages: read (the serial input_node body, which also plans each epoch
// as the reader reaches it) and decompress (the parallel body that decodes a stored frame into a
// recycled buffer and tells the scheduler which batches it completes). Beside them, the what-if
// caches: for a what-if run, the frames read, decoded or assembled ahead of time, which these
// bodies and assemble then use in place of the real work. Each decompress thread keeps its own
// zstd context (ThisThreadDctx), shared by the what-if decode.
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "pipeline/internal/pipeline_core.h"
#include "pipeline/internal/stage_range.h"

namespace sluice::pipeline_internal {

namespace {
struct ThreadDctx {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~ThreadDctx() { ZSTD_freeDCtx(ctx); }
};
void* ThisThreadDctx() {
  thread_local ThreadDctx d;
  return d.ctx;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// what-if caches

absl::Status PipelineCore::BuildWhatIfCaches() {
  const std::optional<Stage> w = opt_.diagnostics.what_if;
  if (!w || *w == Stage::kH2D || *w == Stage::kCompute) return absl::OkStatus();
  if (*w == Stage::kTransforms) return BuildChainFreeSamples();
  if (*w == Stage::kDecode) return BuildDecodedImages();
  const size_t f = layout_.frames.size();
  if (*w == Stage::kRead) {
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
    absl::Status s = r->DecodeFrame(
        fr.frame, stored, absl::MakeSpan(decoded_cache_[i].data(), decoded_cache_[i].size()),
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
  if (*w == Stage::kDecompress) return absl::OkStatus();
  // kPreprocess: build every batch of the start epoch now.
  ASSIGN_OR_RETURN(EpochPlan plan,
                   PlanEpoch(layout_, order_, opt_.span.start_epoch, opt_.span.start_step));
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
    GatherBatch(run, b, prebuilt_[b].data(), &prebuilt_size_[b]);
  }
  decoded_cache_.clear();  // the prebuilt batches are all assemble needs
  decoded_corrupt_.clear();
  // The chain's time building them is not the run's: the report splits the run's own.
  if (preprocessor_.has_value()) {
    for (size_t k = 0; k < preprocessor_->chain().size(); ++k) op_ns_total_[k].store(0);
    chain_timed_samples_.store(0);
  }
  return absl::OkStatus();
}

// The layout's first frame, read and decompressed: what the what-if transforms and decode
// caches are built from.
absl::Status PipelineCore::ReadLayoutFrame(size_t index, std::string* raw) const {
  const FrameRef& fr = layout_.frames[index];
  const ShardReader* r = readers_[fr.shard];
  std::string stored;
  RETURN_IF_ERROR(r->ReadStoredFrame(fr.frame, &stored));
  raw->assign(r->frames()[fr.frame].raw_size, '\0');
  return r->DecodeFrame(fr.frame, stored, absl::MakeSpan(raw->data(), raw->size()),
                        ThisThreadDctx());
}

absl::Status PipelineCore::ForEachLeadingRecord(
    const char* what, const std::function<absl::Status(const FrameView&, uint32_t)>& take,
    const std::function<bool()>& enough) const {
  // At most this many frames are read: a bound on the start-up where no record decodes.
  constexpr size_t kMaxFrames = 16;
  const size_t frames = std::min(kMaxFrames, layout_.frames.size());
  const bool skip = opt_.on_corrupt == OnCorrupt::kSkip;
  uint64_t taken = 0;
  // The first frame with a record that goes through (its records only: the samples stay
  // those of one frame where it has any).
  for (size_t f = 0; f < frames && taken == 0; ++f) {
    const FrameRef& fr = layout_.frames[f];
    const ShardReader* r = readers_[fr.shard];
    std::string raw;
    if (absl::Status st = ReadLayoutFrame(f, &raw); !st.ok()) {
      if (skip && absl::IsDataLoss(st)) continue;  // a corrupt frame, skipped as the run does
      return st;
    }
    const FrameView frame(spec_, fr.record_count, raw.data());
    for (uint32_t i = 0; i < fr.record_count && !enough(); ++i) {
      const absl::Status st = take(frame, i);
      taken += st.ok();
      // A record the chain refuses (a corrupt image) is left out under the skip policy.
      if (!st.ok() && (!skip || !absl::IsDataLoss(st))) {
        return absl::Status(st.code(), absl::StrCat(r->path(), ": record ", fr.first_record + i,
                                                    ": ", st.message()));
      }
    }
  }
  if (taken == 0) {
    return absl::DataLossError(absl::StrCat(
        what, ": no record of the first ", frames, frames == 1 ? " frame" : " frames", " (from ",
        readers_[layout_.frames.front().shard]->path(), " on) goes through"));
  }
  return absl::OkStatus();
}

// The chain's outputs of the first usable frame's records (at most kChainFreeSamples), so the
// batches keep real values (a backend's cost can follow them) at no chain cost per sample.
absl::Status PipelineCore::BuildChainFreeSamples() {
  if (!preprocessor_.has_value()) {
    return absl::InvalidArgumentError(
        "what-if transforms: the run has no transforms to make free (set transforms)");
  }
  constexpr uint32_t kChainFreeSamples = 64;
  if (layout_.frames.empty()) return absl::OkStatus();  // no batches
  const size_t out_bytes = batch_sample_.bytes();
  chain_free_samples_.assign(size_t{kChainFreeSamples} * out_bytes, 0);
  ScratchSlot& s = scratch_.front();
  uint32_t made = 0;
  const absl::Status built = ForEachLeadingRecord(
      "what-if transforms",
      [&](const FrameView& frame, uint32_t i) {
        RETURN_IF_ERROR(preprocessor_->Process(
            frame.sample(i), frame.sample_size(i), chain_free_samples_.data() + made * out_bytes,
            SampleKey{opt_.order.seed, 0, made}, s.aligned, nullptr));
        ++made;
        return absl::OkStatus();
      },
      [&] { return made == kChainFreeSamples; });
  if (!built.ok()) return built;
  chain_free_count_ = made;
  return absl::OkStatus();
}

// The decoder's output for the first usable frame's records (at most kDecodedImages), so the ops
// after it work on real images of this dataset, at no decode cost per sample.
absl::Status PipelineCore::BuildDecodedImages() {
  if (!preprocessor_.has_value() || !preprocessor_->chain().decodes()) {
    return absl::InvalidArgumentError(
        "what-if decode: the run decodes nothing (its records are not encoded images)");
  }
  constexpr uint32_t kDecodedImages = 64;
  if (layout_.frames.empty()) return absl::OkStatus();  // no batches
  const TransformChain& chain = preprocessor_->chain();
  std::vector<char> image(chain.spec(1).bytes());
  ScratchSlot& s = scratch_.front();
  return ForEachLeadingRecord(
      "what-if decode",
      [&](const FrameView& frame, uint32_t i) {
        ASSIGN_OR_RETURN(
            const SampleSpec spec,
            chain.DecodeRecord(frame.sample(i), frame.sample_size(i), image.data(), s.aligned));
        decoded_images_.push_back(
            {spec, std::vector<char>(image.begin(), image.begin() + spec.bytes())});
        return absl::OkStatus();
      },
      [&] { return decoded_images_.size() == kDecodedImages; });
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
      Fail(
          absl::InternalError(absl::StrCat("frame budget ", frame_budget_, " below the ",
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
    hinted_end_ = 0;
  }
  return true;
}

FrameMsg PipelineCore::ReadBody(oneapi::tbb::flow_control& fc) {
  StageRange nvtx_range("sluice read");
  const int64_t arrived = NowNs();
  if (cancelled() || !AdvanceEpoch()) {
    fc.stop();
    return FrameMsg{};
  }
  // The gap since the previous item is time the frame budget (limiter) held the reader back
  // (not counted for the call that only finds the run over: it is past the reader's window).
  if (read_last_end_ns_ != 0) recorders_[Stage::kRead].AddWaitOutput(arrived - read_last_end_ns_);
  const int64_t start = NowNs();  // planning an epoch is not read time
  const CpuSample cpu(Stage::kRead);
  FrameMsg m;
  m.run = reading_;
  m.slot = next_slot_++;
  m.seq = reading_->first_frame_seq + m.slot;
  m.is_last =
      m.seq + 1 == next_frame_seq_ && next_epoch_ == opt_.span.start_epoch + opt_.span.epochs;
  const uint32_t g = reading_->plan.read_frames[m.slot];
  const FrameRef& fr = layout_.frames[g];
  uint64_t bytes = 0;
  if (stored_cache_.empty()) {
    // Remote shards start fetching the next frames while this one is read; each frame of
    // the epoch is hinted once.
    const std::vector<uint32_t>& order = reading_->plan.read_frames;
    const size_t hint_end =
        std::min<size_t>(order.size(), static_cast<size_t>(m.slot) + 1 +
                                           read_concurrency_.load(std::memory_order_relaxed));
    for (size_t s = std::max<size_t>(hinted_end_, m.slot + 1); s < hint_end; ++s) {
      const FrameRef& next = layout_.frames[order[s]];
      readers_[next.shard]->WillReadFrame(next.frame);
    }
    hinted_end_ = static_cast<uint32_t>(std::max<size_t>(hinted_end_, hint_end));
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
  SleepFor(opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kRead)]);
  const int64_t end = NowNs();
  read_last_end_ns_ = end;
  if (tuning_concurrency_) TuneReadConcurrency(end);
  frames_read_.fetch_add(1, std::memory_order_relaxed);
  recorders_[Stage::kRead].NoteQueue(frames_resident_.fetch_add(1, std::memory_order_relaxed) + 1);
  recorders_[Stage::kDecompress].NoteQueue(frames_queued_.fetch_add(1, std::memory_order_relaxed) +
                                           1);
  Record(Stage::kRead, start, end, m.seq, fr.record_count, bytes, cpu.Elapsed());
  {
    std::lock_guard<std::mutex> lock(epoch_reads_mu_);
    if (epoch_reads_.empty() || epoch_reads_.back().epoch != reading_->plan.epoch) {
      epoch_reads_.push_back({.epoch = reading_->plan.epoch});
    }
    EpochReads& e = epoch_reads_.back();
    ++e.frames;
    e.bytes += bytes;
    e.busy_ns += end - start;
  }
  return m;
}

// Hill climbing on the rate the reader delivers (frames per second of wall time, its waits for
// the frame budget included): after a first window that only warms up, each window of
// max(16, 2 x concurrency) frames at a concurrency doubles it while the rate rose by 10% over
// the best so far; the first window that does not goes back to the best and stops. A reader
// held back downstream, or a local file (hints are no-ops), stops at once.
void PipelineCore::TuneReadConcurrency(int64_t now_ns) {
  constexpr double kGain = 1.10;
  if (tune_start_ns_ == 0) {
    tune_start_ns_ = now_ns;
    tune_frames_ = 0;
    return;
  }
  const uint32_t c = read_concurrency_.load(std::memory_order_relaxed);
  if (++tune_frames_ < std::max<uint32_t>(16, 2 * c)) return;
  const double rate = tune_frames_ / (static_cast<double>(now_ns - tune_start_ns_) * 1e-9);
  tune_start_ns_ = now_ns;
  tune_frames_ = 0;
  if (!tuning_warmed_) {  // the first window holds the start-up
    tuning_warmed_ = true;
    return;
  }
  if (rate > tune_best_rate_ * kGain && c < kMaxReadConcurrencyTuned) {
    tune_best_rate_ = rate;
    tune_best_ = c;
    read_concurrency_.store(std::min(kMaxReadConcurrencyTuned, 2 * c), std::memory_order_relaxed);
    return;
  }
  if (rate > tune_best_rate_ * kGain) tune_best_ = c;  // at the bound and still rising
  read_concurrency_.store(std::max(tune_best_, kAutoReadConcurrencyStart),
                          std::memory_order_relaxed);
  tuning_concurrency_ = false;
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
  const CpuSample cpu(Stage::kDecompress);
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
    for (uint32_t i = 0; i < run.plan.sample_slot.size(); ++i)
      used += run.plan.sample_slot[i] == m.slot;
    skipped_records_.fetch_add(used, std::memory_order_relaxed);
  }
  SpinFor(opt_.diagnostics.inject_delay_us[static_cast<int>(Stage::kDecompress)]);
  const int64_t end = NowNs();
  Record(Stage::kDecompress, start, end, m.seq, fr.record_count,
         reader->frames()[fr.frame].raw_size, cpu.Elapsed());
  OnFrameReady(m.run, m.slot);
}

}  // namespace sluice::pipeline_internal
