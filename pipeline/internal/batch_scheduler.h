// BatchScheduler: decides when a batch whose frames are all decoded may be assembled. A batch
// is dispatched once it can be granted one of the pool's `buffers` pinned buffers under the
// grant rule (BatchScheduler::DispatchLocked in the .cc explains why the rule cannot
// deadlock the in-order sequencer); the rest wait in a heap ordered by batch id.
//
// Dispatching goes through the `dispatch` callback, run once per batch, in the order the
// batches are granted, with the time of the grant (the caller measures the pinned-buffer wait
// as now_ns - ready_ns). The callback runs under the scheduler's mutex, which makes dispatch
// atomic with Shutdown(): it must only hand the batch on (e.g. a flow-graph try_put, which
// spawns and never runs the body inline) and never call back into the scheduler.
//
// Ownership: borrows `cancelled` (the pipeline's cancellation flag), which must outlive the
// scheduler; holds the waiting batches (and so their epochs) until dispatched or destroyed.
// Errors: none; returning more buffers than were granted is a caller bug.
// Thread safety: thread safe; one mutex guards all state.
#ifndef SLUICE_PIPELINE_INTERNAL_BATCH_SCHEDULER_H_
#define SLUICE_PIPELINE_INTERNAL_BATCH_SCHEDULER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace sluice::pipeline_internal {

struct EpochRun;

// A batch whose frames are all decoded.
struct ReadyBatch {
  uint64_t id = 0;       // run-wide batch id
  int64_t ready_ns = 0;  // when its last frame was decoded
  std::shared_ptr<EpochRun> run;
  uint32_t index = 0;  // within run->plan
};

class BatchScheduler {
 public:
  using DispatchFn = std::function<void(const ReadyBatch& batch, int64_t now_ns)>;

  // `buffers`: the pinned buffers batches are assembled into (the pool's size).
  // `max_not_started`: at most this many dispatched batches not yet Started() (0: no bound):
  // a batch is dispatched when a preprocess thread will soon take it, so a buffer is never
  // held by a batch queued for a thread, and a batch that waits while the threads are busy
  // waits for a thread, not for a buffer (neither its pinned wait nor the blocked span counts
  // that time).
  BatchScheduler(uint64_t buffers, const std::atomic<bool>* cancelled, DispatchFn dispatch,
                 uint64_t max_not_started = 0);
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  // Moves the batches in `ready` (which is left empty, its capacity kept) into the heap and
  // dispatches what the grant rule allows. Returns how many batches waited after adding,
  // before dispatching (0 when shut down or cancelled: nothing is added then).
  size_t AddReady(std::vector<ReadyBatch>* ready);
  // A granted buffer is back in the pool: dispatches what the grant rule now allows.
  void ReturnBuffer();
  // A dispatched batch's assembly started: dispatches what max_not_started now allows.
  void Started();
  // Nothing is dispatched after this returns (buffers are still counted back).
  void Shutdown();

  uint64_t outstanding() const;  // buffers granted and not yet returned
  size_t waiting() const;        // ready batches not yet dispatched
  // Time during which at least one ready batch waited for a buffer, up to `now_ns` (the
  // assemble stage held back by the pool: a span of time, never more than the wall clock,
  // unlike the waits of the batches summed).
  int64_t blocked_ns(int64_t now_ns) const;

 private:
  struct Later {
    bool operator()(const ReadyBatch& a, const ReadyBatch& b) const { return a.id > b.id; }
  };
  // The heap of waiting batches, whose wait can restart (their order is by id alone).
  class ReadyHeap : public std::priority_queue<ReadyBatch, std::vector<ReadyBatch>, Later> {
   public:
    void RestartWaits(int64_t now_ns) {
      for (ReadyBatch& b : c) b.ready_ns = std::max(b.ready_ns, now_ns);
    }
  };
  bool stopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shut_down_ || cancelled_->load(std::memory_order_acquire);
  }
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t buffers_;
  const std::atomic<bool>* const cancelled_;
  const DispatchFn dispatch_;
  // std::mutex, not absl::Mutex: Debian's prebuilt Abseil is not instrumented for
  // ThreadSanitizer, so its locks would be invisible to scripts/sanitize.sh.
  mutable std::mutex mu_;
  const uint64_t max_not_started_;
  ReadyHeap ready_ ABSL_GUARDED_BY(mu_);
  uint64_t not_started_ ABSL_GUARDED_BY(mu_) = 0;  // dispatched, Started() not yet called
  uint64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // buffers granted, not yet returned
  uint64_t lowest_undispatched_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> dispatched_ahead_ ABSL_GUARDED_BY(mu_);  // dispatched ids above it
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t blocked_since_ns_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no batch waiting for a buffer
  int64_t blocked_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_BATCH_SCHEDULER_H_
