// MeasuredBackend: wraps the run's Backend and measures every train step for the RunRecord,
// and implements the compute what-if (no compute) and the injected compute delay.
//
// Timing: on a backend without a device (CPU), a step's time is the host time inside
// TrainStep. On a device backend, TrainStep only enqueues: the compute stream first waits for
// the batch's ready event, then each step is bracketed by two timing events on the compute
// stream. A step's busy time is the device time between them; the gap between one step's end
// and the next step's start is time the device waited (for data, or for the host to enqueue
// the step); the host time in TrainStep is kept apart as the enqueue time. The start event is
// enqueued before the step's work, so when the device is faster than the host's launches it
// reaches the start at once and then waits for each launch inside the step's span: the part of
// a span before the host finished enqueuing that step is kept as launch-gated time
// (ComputeStats::launch_gated_ns), and only the span after it counts as compute that can hide
// a copy. Events are reused from a ring of kEventRing pairs: the host blocks only when it runs
// kEventRing steps ahead.
//
// Ownership: borrows `inner`, which must outlive it. Thread safety: the training thread only.
#ifndef SLUICE_ENGINE_JOB_MEASURED_BACKEND_H_
#define SLUICE_ENGINE_JOB_MEASURED_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "report/record/run_record.h"

namespace sluice {

class MeasuredBackend final : public Backend {
 public:
  static constexpr size_t kEventRing = 256;

  // `delay_us`: added to every step (on a device, the compute stream is held that long inside
  // the step's events; on the CPU, a busy-wait). `keep_spans`: keep one ComputeSpan per step for
  // the timeline.
  MeasuredBackend(Backend* inner, bool compute_free, int64_t delay_us, bool keep_spans);

  std::string name() const override { return inner_->name(); }
  device::Platform platform() const override { return inner_->platform(); }
  int compute_threads() const override { return inner_->compute_threads(); }
  int64_t helper_cpu_ns() const override { return inner_->helper_cpu_ns(); }
  absl::Status TrainStep(const BatchView& batch, float lr) override;
  absl::StatusOr<LossStats> TakeLoss() override;
  absl::Status Evaluate(const BatchView& batch, EvalStats* stats) override;
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<ModelState> SaveState() override { return inner_->SaveState(); }
  absl::Status LoadState(const ModelState& state) override { return inner_->LoadState(state); }
  MemoryReport memory() const override { return inner_->memory(); }
  ExchangeStats exchange() const override { return inner_->exchange(); }
  device::Device* device() const override { return inner_->device(); }
  device::Stream* compute_stream() const override { return inner_->compute_stream(); }

  // The statistics so far. On a device backend this first waits for the steps still in
  // flight to have their events timed.
  const ComputeStats& stats();
  std::vector<ComputeSpan> TakeSpans();

 private:
  struct StepEvents {
    std::unique_ptr<device::Event> start;
    std::unique_ptr<device::Event> end;
    uint64_t step = 0;
    int64_t host_start_ns = 0;  // the host's enqueue of the step, steady clock
    int64_t host_end_ns = 0;
    bool pending = false;
    bool first_of_epoch = false;
  };
  absl::Status EnsureEvents();
  absl::Status Resolve(StepEvents& e);  // adds a completed step's device times to stats_
  absl::Status ResolveAll();
  void AddSpan(uint64_t step, int64_t start, int64_t end, bool first_of_epoch);

  Backend* inner_;
  bool compute_free_;
  int64_t delay_us_;
  bool keep_spans_;
  int64_t free_samples_ = 0;
  ComputeStats stats_;
  std::vector<ComputeSpan> spans_;
  CopyOverlap copy_overlap_;
  uint64_t epoch_ = 0;  // the epoch of the last step + 1 (0: none yet)  // the batches' copies
                        // against the steps (ComputeStats::copy_ns)
  // Device timing.
  device::Stream* stream_ = nullptr;
  std::vector<StepEvents> ring_;
  size_t next_ = 0;          // ring slot of the next step
  int64_t prev_end_ns_ = 0;  // host-clock end of the last resolved step
  absl::Status timing_error_;
};

}  // namespace sluice

#endif  // SLUICE_ENGINE_JOB_MEASURED_BACKEND_H_
