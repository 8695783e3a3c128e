#include "engine/job/measured_backend.h"

#include <algorithm>
#include <utility>

#include "common/clock.h"
#include "common/status_macros.h"
#include "pipeline/stage_stats.h"

namespace sluice {

MeasuredBackend::MeasuredBackend(Backend* inner, bool compute_free, int64_t delay_us,
                                 bool keep_spans)
    : inner_(inner), compute_free_(compute_free), delay_us_(delay_us), keep_spans_(keep_spans) {
  stats_.device = inner->name();
  stats_.is_cuda = inner->platform() == device::Platform::kCuda;
  stats_.threads = std::max(1, inner->compute_threads());
  stream_ = inner->compute_stream();
  stats_.on_device = stream_ != nullptr;
}

absl::Status MeasuredBackend::EnsureEvents() {
  if (!ring_.empty() || stream_ == nullptr) return absl::OkStatus();
  ring_.resize(kEventRing);
  for (StepEvents& e : ring_) {
    ASSIGN_OR_RETURN(e.start, inner_->device()->CreateEvent(/*timing=*/true));
    ASSIGN_OR_RETURN(e.end, inner_->device()->CreateEvent(/*timing=*/true));
  }
  return absl::OkStatus();
}

absl::Status MeasuredBackend::TrainStep(const BatchView& batch, float lr) {
  const bool first_of_epoch = epoch_ != batch.epoch + 1;
  if (stream_ != nullptr && first_of_epoch) {
    // Steps are placed on the host clock from the device's clock anchor: re-take it every
    // epoch (device/clock_anchor.h), once the previous epoch's steps are placed. Not part of
    // the step's enqueue time.
    RETURN_IF_ERROR(ResolveAll());
    RETURN_IF_ERROR(inner_->device()->RefreshClockAnchor(0));
  }
  const int64_t host_start = NowNs();
  StepEvents* ev = nullptr;
  if (stream_ != nullptr) {
    RETURN_IF_ERROR(EnsureEvents());
    // The step's span starts once its data is there: the wait is the device's idle time.
    if (batch.ready_event != nullptr) RETURN_IF_ERROR(stream_->Wait(batch.ready_event));
    ev = &ring_[next_ % ring_.size()];
    ++next_;
    if (ev->pending) RETURN_IF_ERROR(Resolve(*ev));
    RETURN_IF_ERROR(stream_->Record(ev->start.get()));
  }
  absl::Status status;
  // The CPU time of the step on a host backend: this thread's and the backend's team's.
  const bool host_step = stream_ == nullptr;
  const int64_t cpu_start = host_step ? ThreadCpuNs() + inner_->helper_cpu_ns() : 0;
  if (compute_free_) {
    free_samples_ += batch.size;
  } else {
    status = inner_->TrainStep(batch, lr);
  }
  if (host_step) {
    stats_.cpu_ns += ThreadCpuNs() + inner_->helper_cpu_ns() - cpu_start;
    // An injected delay stands for a step that much longer on each of its threads (it spins
    // on this one), so it counts as that much CPU per thread: a slower step, not a starved one.
    stats_.cpu_ns += delay_us_ * 1000 * stats_.threads;
  }
  if (delay_us_ > 0) {
    if (stream_ != nullptr) {
      // Device time: the compute stream is held this long inside the step's events, by a
      // device-side delay (a spinning host callback could also hold the uploads' callbacks).
      RETURN_IF_ERROR(stream_->Delay(delay_us_));
    } else {
      SpinFor(delay_us_);  // the busy-wait the pipeline's stages use for their delays
    }
  }
  copy_overlap_.AddCopy(batch.copy_start_ns, batch.copy_end_ns);  // host batches: none
  epoch_ = batch.epoch + 1;
  const uint64_t step = stats_.steps++;
  stats_.samples += batch.size;
  const int64_t host_end = NowNs();
  stats_.enqueue_ns += host_end - host_start;
  if (ev != nullptr) {
    RETURN_IF_ERROR(stream_->Record(ev->end.get()));
    ev->step = step;
    ev->host_start_ns = host_start;
    ev->host_end_ns = host_end;
    ev->pending = true;
    ev->first_of_epoch = first_of_epoch;
  } else {
    if (stats_.first_start_ns == 0) stats_.first_start_ns = host_start;
    stats_.busy_ns += host_end - host_start;
    stats_.step_latency.Add(host_end - host_start);
    stats_.last_end_ns = host_end;
    AddSpan(step, host_start, host_end, first_of_epoch);
  }
  return status;
}

absl::Status MeasuredBackend::Resolve(StepEvents& e) {
  e.pending = false;
  RETURN_IF_ERROR(e.end->Synchronize());
  // The start placed on the host clock; the duration from the event pair itself, which is
  // exact where two placed times would each carry the anchor's rounding.
  ASSIGN_OR_RETURN(const int64_t start, e.start->HostNanos());
  ASSIGN_OR_RETURN(const int64_t duration, e.end->NanosSince(*e.start));
  const int64_t end = start + duration;
  if (stats_.first_start_ns == 0) stats_.first_start_ns = start;
  // Idle between steps of one epoch only: the gap before an epoch's first step holds the
  // evaluation and the pipeline's rebuild, which the report's span (training time) leaves out.
  if (prev_end_ns_ != 0 && !e.first_of_epoch) {
    stats_.idle_ns += std::max<int64_t>(0, start - prev_end_ns_);
  }
  prev_end_ns_ = end;
  stats_.busy_ns += std::max<int64_t>(0, end - start);
  stats_.step_latency.Add(std::max<int64_t>(0, end - start));
  stats_.last_end_ns = std::max(stats_.last_end_ns, end);
  // The span while the host was still enqueuing this step: the device may have been waiting
  // for its launches there, so that time neither proves the device busy nor hides a copy.
  const int64_t gated_end = std::min(end, e.host_end_ns);
  stats_.launch_gated_ns += std::max<int64_t>(0, gated_end - std::max(start, e.host_start_ns));
  stats_.timeline.AddCompute(start, end);  // always: fixed size, no allocation
  copy_overlap_.AddCompute(std::max(start, std::min(e.host_end_ns, end)), end, e.first_of_epoch);
  if (keep_spans_) spans_.push_back({e.step, start, end, e.host_end_ns});
  return absl::OkStatus();
}

absl::Status MeasuredBackend::ResolveAll() {
  // Oldest first: the ring slot after the newest one.
  for (size_t i = 0; i < ring_.size(); ++i) {
    StepEvents& e = ring_[(next_ + i) % ring_.size()];
    if (e.pending) RETURN_IF_ERROR(Resolve(e));
  }
  return absl::OkStatus();
}

void MeasuredBackend::AddSpan(uint64_t step, int64_t start, int64_t end, bool first_of_epoch) {
  stats_.timeline.AddCompute(start, end);  // always: fixed size, no allocation
  copy_overlap_.AddCompute(start, end, first_of_epoch);
  if (keep_spans_) spans_.push_back({step, start, end});
}

const ComputeStats& MeasuredBackend::stats() {
  if (timing_error_.ok()) timing_error_ = ResolveAll();
  stats_.copy_ns = copy_overlap_.copy_ns();
  stats_.copy_hidden_ns = copy_overlap_.hidden_ns();
  stats_.startup_copy_ns = copy_overlap_.startup_ns();
  return stats_;
}

std::vector<ComputeSpan> MeasuredBackend::TakeSpans() {
  (void)stats();
  return std::move(spans_);
}

absl::StatusOr<LossStats> MeasuredBackend::TakeLoss() {
  if (!compute_free_) return inner_->TakeLoss();
  LossStats loss;
  loss.samples = free_samples_;
  free_samples_ = 0;
  return loss;
}

absl::Status MeasuredBackend::Evaluate(const BatchView& batch, EvalStats* stats) {
  if (compute_free_) {
    stats->samples += batch.size;
    return absl::OkStatus();
  }
  const int64_t start = NowNs();
  absl::Status status = inner_->Evaluate(batch, stats);
  stats_.timeline.AddOther(start, NowNs());  // host time: the timeline's evaluation share
  return status;
}

}  // namespace sluice
