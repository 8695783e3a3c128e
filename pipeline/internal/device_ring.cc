#include "pipeline/internal/device_ring.h"

#include <algorithm>
#include <utility>

#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {

DeviceRing::DeviceRing(uint32_t depth, const std::atomic<bool>* cancelled, EnqueueFn enqueue,
                       ReleaseSlotFn release_slot)
    : depth_(depth),
      cancelled_(cancelled),
      enqueue_(std::move(enqueue)),
      release_slot_(std::move(release_slot)) {}

size_t DeviceRing::Submit(const BatchMsg& batch) {
  std::lock_guard<std::mutex> l(mu_);
  if (!pending_.empty() || batch.id >= lowest_unreleased_ + depth_) {
    const int64_t now = NowNs();
    if (pending_.empty()) blocked_since_ns_ = now;
    pending_.emplace_back(batch, now);  // the consumer's release will start it
    return pending_.size();
  }
  enqueue_(batch, SlotOf(batch.id), 0);
  return 0;
}

void DeviceRing::Release(uint64_t id, uint32_t slot, device::Stream* stream) {
  std::lock_guard<std::mutex> l(mu_);
  // Under mu_: the enqueue of the slot's next batch reads the release state this writes.
  if (stream != nullptr) release_slot_(slot, stream);
  released_.insert(id);
  while (!released_.empty() && *released_.begin() == lowest_unreleased_) {
    released_.erase(released_.begin());
    ++lowest_unreleased_;
  }
  const int64_t now = NowNs();
  while (!pending_.empty() && !cancelled_->load(std::memory_order_acquire) &&
         pending_.front().first.id < lowest_unreleased_ + depth_) {
    const BatchMsg& b = pending_.front().first;
    enqueue_(b, SlotOf(b.id), now - pending_.front().second);
    pending_.pop_front();
  }
  if (pending_.empty() && blocked_since_ns_ != 0) {
    blocked_ns_ += now - blocked_since_ns_;
    blocked_since_ns_ = 0;
  }
}

void DeviceRing::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  pending_.clear();
}

int64_t DeviceRing::blocked_ns(int64_t now_ns) const {
  std::lock_guard<std::mutex> l(mu_);
  return blocked_ns_ +
         (blocked_since_ns_ != 0 ? std::max<int64_t>(0, now_ns - blocked_since_ns_) : 0);
}

uint64_t DeviceRing::lowest_unreleased() const {
  std::lock_guard<std::mutex> l(mu_);
  return lowest_unreleased_;
}

size_t DeviceRing::waiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.size();
}

}  // namespace sluice::pipeline_internal
