#include "engine/job/pipeline_batch_source.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {

PipelineBatchSource::PipelineBatchSource(const Dataset* dataset, PipelineOptions options,
                                         uint64_t last_epoch,
                                         std::function<device::Stream*()> compute_stream)
    : dataset_(dataset),
      options_(std::move(options)),
      last_epoch_(last_epoch),
      compute_stream_(std::move(compute_stream)) {}

absl::Status PipelineBatchSource::Rebuild(uint64_t epoch, uint64_t step) {
  // Leases keep the old pipeline's memory alive; give them back before it goes.
  pending_.Release();
  for (auto& lease : leases_) lease.Release(compute_stream_ ? compute_stream_() : nullptr);
  leases_.clear();
  pipeline_.reset();
  PipelineOptions options = options_;
  options.span.start_epoch = epoch;
  options.span.start_step = step;
  options.span.epochs = last_epoch_ > epoch ? last_epoch_ - epoch : 1;
  ASSIGN_OR_RETURN(pipeline_, Pipeline::Create(dataset_, options));
  pipeline_->SetConsumerInSpan(in_span_);
  steps_per_epoch_ = pipeline_->steps_per_epoch();
  epoch_ = epoch;
  step_ = step;
  finished_ = false;
  return absl::OkStatus();
}

void PipelineBatchSource::Retune(const PipelineResources& resources) {
  options_.resources = resources;
  retuned_ = true;
}

absl::Status PipelineBatchSource::Seek(uint64_t epoch, uint64_t step) {
  if (pipeline_ != nullptr && epoch == epoch_ && step == step_ && !retuned_) {
    return absl::OkStatus();
  }
  retuned_ = false;
  return Rebuild(epoch, step);
}

absl::StatusOr<std::optional<BatchView>> PipelineBatchSource::Next() {
  if (pipeline_ == nullptr) {
    return absl::FailedPreconditionError("PipelineBatchSource: Next() before Seek()");
  }
  BatchLease lease;
  if (pending_.valid()) {
    if (pending_.view().epoch != epoch_) return std::optional<BatchView>();
    lease = std::move(pending_);
  } else {
    if (finished_) return std::optional<BatchView>();
    ASSIGN_OR_RETURN(bool got, pipeline_->Next(&lease));
    if (!got) {
      finished_ = true;
      return std::optional<BatchView>();
    }
    if (lease.view().epoch != epoch_) {
      // The current epoch is over; keep this batch for after Seek(epoch + 1, 0).
      pending_ = std::move(lease);
      epoch_ = pending_.view().epoch;
      step_ = 0;
      return std::optional<BatchView>();
    }
  }
  step_ = lease.view().step + 1;
  leases_.push_back(std::move(lease));
  return std::optional<BatchView>(leases_.back().view());
}

void PipelineBatchSource::Release(const BatchView& batch) {
  for (auto it = leases_.begin(); it != leases_.end(); ++it) {
    if (it->view().samples == batch.samples) {
      it->Release(compute_stream_ ? compute_stream_() : nullptr);
      leases_.erase(it);
      return;
    }
  }
}

void PipelineBatchSource::NoteSpan(bool in_span) {
  in_span_ = in_span;
  if (pipeline_ != nullptr) pipeline_->SetConsumerInSpan(in_span);
}

KeyValues PipelineBatchSource::Describe() const {
  return {{"source", "pipeline"},
          {"dataset", dataset_->manifest_path()},
          {"batch_size", absl::StrCat(options_.order.batch_size)},
          {"seed", absl::StrCat(options_.order.seed)},
          {"shuffle", options_.order.shuffle ? "1" : "0"},
          {"shuffle_window_frames", absl::StrCat(options_.order.shuffle_window_frames)},
          {"drop_last", options_.order.drop_last ? "1" : "0"},
          {"h2d_format", std::string(H2DFormatName(options_.format.h2d_format))},
          {"epoch", absl::StrCat(epoch_)},
          {"step", absl::StrCat(step_)}};
}

}  // namespace sluice
