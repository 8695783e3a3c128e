// DeviceRing: admission to the device's ring of `depth` batch slots. Batch `id` uploads into
// slot id % depth, and may start only when id < lowest_unreleased + depth, where
// lowest_unreleased is the lowest batch id the consumer has not released yet: so the slot's
// previous occupant (id - depth) has been released. Batches that may not start yet wait, in
// order, and start as the consumer's releases (in any order) advance lowest_unreleased.
//
// The ring does not talk to the device: starting an upload is the `enqueue` callback, and
// handing a slot back on the device is the `release_slot` callback. Both run under the ring's
// mutex, and that is a rule, not an accident: the uploader's Enqueue reads a slot's release
// state, which ReleaseSlot writes, so the release and the enqueue decisions it unblocks must
// be serialized by one lock (DeviceUploader relies on its caller for that).
//
// Ownership: borrows `cancelled` (the pipeline's cancellation flag; once set, waiting batches
// are no longer started), which must outlive the ring; holds waiting batches until started,
// cleared or destroyed.
// Errors: none of its own; the callbacks report theirs to the pipeline.
// Thread safety: thread safe; one mutex guards all state. The callbacks must not call back
// into the ring.
#ifndef SLUICE_PIPELINE_INTERNAL_DEVICE_RING_H_
#define SLUICE_PIPELINE_INTERNAL_DEVICE_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "pipeline/internal/pipeline_messages.h"

namespace sluice::device {
class Stream;
}  // namespace sluice::device

namespace sluice::pipeline_internal {

class DeviceRing {
 public:
  // Starts the upload of `batch` into `slot`. `waited_ns`: how long it waited for the slot
  // (0 when it started on submission).
  using EnqueueFn = std::function<void(const BatchMsg& batch, uint32_t slot, int64_t waited_ns)>;
  // Hands `slot` back on the device once `stream`'s work enqueued so far is done.
  using ReleaseSlotFn = std::function<void(uint32_t slot, device::Stream* stream)>;

  DeviceRing(uint32_t depth, const std::atomic<bool>* cancelled, EnqueueFn enqueue,
             ReleaseSlotFn release_slot);
  DeviceRing(const DeviceRing&) = delete;
  DeviceRing& operator=(const DeviceRing&) = delete;

  uint32_t depth() const { return depth_; }
  uint32_t SlotOf(uint64_t id) const { return static_cast<uint32_t>(id % depth_); }

  // Starts `batch` now if its slot is free and no earlier batch waits (uploads start in id
  // order), else queues it. Returns how many batches wait afterwards (0: it started).
  size_t Submit(const BatchMsg& batch);
  // The consumer is done with batch `id` in `slot`: release_slot(slot, stream) runs first
  // (unless `stream` is null: nothing on the device still reads the slot), then every waiting
  // batch the release lets in starts, in order, unless the pipeline was cancelled.
  void Release(uint64_t id, uint32_t slot, device::Stream* stream);
  // Drops the waiting batches (shutdown).
  void Clear();

  uint64_t lowest_unreleased() const;
  size_t waiting() const;
  // Time during which at least one batch waited for a slot, up to `now_ns`: the upload stage
  // held back by the ring (a span of time, not the batches' waits summed).
  int64_t blocked_ns(int64_t now_ns) const;

 private:
  const uint32_t depth_;
  const std::atomic<bool>* const cancelled_;
  const EnqueueFn enqueue_;
  const ReleaseSlotFn release_slot_;
  mutable std::mutex mu_;
  std::deque<std::pair<BatchMsg, int64_t>> pending_ ABSL_GUARDED_BY(mu_);  // with since_ns
  uint64_t lowest_unreleased_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> released_ ABSL_GUARDED_BY(mu_);   // released ids above it
  int64_t blocked_since_ns_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no batch waiting
  int64_t blocked_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_DEVICE_RING_H_
