// PipelineBatchSource: adapts a Pipeline (pipeline/pipeline.h) to the Trainer's BatchSource
// interface.
//
// One Pipeline delivers a whole run (start epoch/step to the last epoch); Seek() to the position
// the pipeline is already at costs nothing, any other Seek() rebuilds the pipeline at that
// position (it computes which frames to read; it never replays the epoch). Next() returns
// nullopt at the end of each epoch.
//
// Ownership: borrows `dataset`, which must outlive the source; owns the Pipeline and the lease
// of the batch handed out until Release().
// Errors: those of Pipeline::Create / Pipeline::Next (kDataLoss for corrupt frames).
// Thread safety: one thread (the training thread).
#ifndef SLUICE_ENGINE_JOB_PIPELINE_BATCH_SOURCE_H_
#define SLUICE_ENGINE_JOB_PIPELINE_BATCH_SOURCE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine/trainer.h"
#include "pipeline/pipeline.h"
#include "storage/dataset.h"

namespace sluice {

class PipelineBatchSource : public BatchSource {
 public:
  // `options.span` is managed by Seek(); `last_epoch` is the last
  // epoch (exclusive) the run will ask for. `compute_stream` returns the stream a lease's
  // device batch is read on (Backend::compute_stream()), may return null.
  PipelineBatchSource(const Dataset* dataset, PipelineOptions options, uint64_t last_epoch,
                      std::function<device::Stream*()> compute_stream = {});

  absl::Status Seek(uint64_t epoch, uint64_t step) override;
  absl::StatusOr<std::optional<BatchView>> Next() override;
  void Release(const BatchView& batch) override;
  uint64_t batches_per_epoch() const override { return steps_per_epoch_; }
  KeyValues Describe() const override;
  void NoteSpan(bool in_span) override;

  // The current pipeline (null before the first Seek). A run seeks once at its start and
  // then only to where the pipeline already is, so one pipeline serves the whole run and its
  // Stats()/Trace() describe it.
  Pipeline* pipeline() const { return pipeline_.get(); }

  // New resources (e.g. from --autotune) for the pipeline; it is rebuilt with them at the next
  // Seek() (the start of the next epoch). Only resources can change, so the order of samples
  // cannot.
  void Retune(const PipelineResources& resources);

 private:
  absl::Status Rebuild(uint64_t epoch, uint64_t step);

  const Dataset* dataset_;
  PipelineOptions options_;
  uint64_t last_epoch_;
  std::function<device::Stream*()> compute_stream_;
  std::unique_ptr<Pipeline> pipeline_;
  uint64_t steps_per_epoch_ = 0;
  uint64_t epoch_ = 0;  // position of the next batch the pipeline will deliver
  uint64_t step_ = 0;
  bool finished_ = false;  // the pipeline delivered its last batch
  bool retuned_ = false;   // rebuild at the next Seek()
  bool in_span_ = true;    // NoteSpan's, given to a rebuilt pipeline
  // A batch of the next epoch, pulled while looking for the end of the current one.
  BatchLease pending_;
  std::deque<BatchLease> leases_;  // handed out, not yet released (in order)
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_PIPELINE_BATCH_SOURCE_H_
