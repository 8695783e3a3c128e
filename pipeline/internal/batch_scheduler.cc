#include "pipeline/internal/batch_scheduler.h"

#include <algorithm>
#include <utility>

#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {

BatchScheduler::BatchScheduler(uint64_t buffers, const std::atomic<bool>* cancelled,
                               DispatchFn dispatch, uint64_t max_not_started)
    : buffers_(buffers),
      cancelled_(cancelled),
      dispatch_(std::move(dispatch)),
      max_not_started_(max_not_started) {}

void BatchScheduler::Started() {
  std::lock_guard<std::mutex> l(mu_);
  if (not_started_ > 0) --not_started_;
  if (stopped()) return;
  DispatchLocked();
}

size_t BatchScheduler::AddReady(std::vector<ReadyBatch>* ready) {
  std::lock_guard<std::mutex> l(mu_);
  if (stopped()) {
    ready->clear();
    return 0;
  }
  for (ReadyBatch& b : *ready) ready_.push(std::move(b));
  ready->clear();
  const size_t waiting = ready_.size();
  DispatchLocked();
  return waiting;
}

void BatchScheduler::ReturnBuffer() {
  std::lock_guard<std::mutex> l(mu_);
  --outstanding_;
  if (stopped()) return;
  DispatchLocked();
}

void BatchScheduler::Shutdown() {
  std::lock_guard<std::mutex> l(mu_);
  shut_down_ = true;
}

uint64_t BatchScheduler::outstanding() const {
  std::lock_guard<std::mutex> l(mu_);
  return outstanding_;
}

size_t BatchScheduler::waiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return ready_.size();
}

int64_t BatchScheduler::blocked_ns(int64_t now_ns) const {
  std::lock_guard<std::mutex> l(mu_);
  return blocked_ns_ +
         (blocked_since_ns_ != 0 ? std::max<int64_t>(0, now_ns - blocked_since_ns_) : 0);
}

// Buffer grants keep a reserve: batch b may take a buffer only if, after it, one is left for
// every batch below b not yet dispatched. So the lowest undispatched batch can always get
// one, and the sequencer (which waits for it) can never be starved by later batches holding
// every buffer. If the lowest ready batch cannot go, no later one can, so checking the top of
// the id-ordered heap is enough.
// Dispatching under the mutex is safe: the callback only hands the batch on (a
// function_node's try_put only spawns or queues a task, it never runs the body inline);
// holding the lock makes dispatch atomic with shutdown.
void BatchScheduler::DispatchLocked() {
  const int64_t now = NowNs();
  bool waiting_for_thread = false;
  while (!ready_.empty()) {
    if (max_not_started_ > 0 && not_started_ >= max_not_started_) {
      waiting_for_thread = true;
      break;
    }
    const ReadyBatch& r = ready_.top();
    uint64_t lower_undispatched = r.id - lowest_undispatched_;
    for (uint64_t d : dispatched_ahead_) {
      if (d >= r.id) break;
      --lower_undispatched;
    }
    const uint64_t free = buffers_ - outstanding_;
    if (free < lower_undispatched + 1) break;
    ++outstanding_;
    dispatched_ahead_.insert(r.id);
    while (!dispatched_ahead_.empty() && *dispatched_ahead_.begin() == lowest_undispatched_) {
      dispatched_ahead_.erase(dispatched_ahead_.begin());
      ++lowest_undispatched_;
    }
    ++not_started_;
    dispatch_(r, now);
    ready_.pop();
  }
  // Held back by busy threads, the waiting batches wait for a thread, not a buffer: their
  // waits for a buffer start again from here, and the blocked span closes.
  if (waiting_for_thread) {
    ready_.RestartWaits(now);
    if (blocked_since_ns_ != 0) {
      blocked_ns_ += now - blocked_since_ns_;
      blocked_since_ns_ = 0;
    }
    return;
  }
  // What is left waits for a buffer: the blocked span opens here and closes at the call that
  // dispatches the last waiting batch (both at this call's one clock read).
  if (!ready_.empty()) {
    if (blocked_since_ns_ == 0) blocked_since_ns_ = now;
  } else if (blocked_since_ns_ != 0) {
    blocked_ns_ += now - blocked_since_ns_;
    blocked_since_ns_ = 0;
  }
}

}  // namespace sluice::pipeline_internal
