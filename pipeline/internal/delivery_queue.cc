#include "pipeline/internal/delivery_queue.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {

size_t DeliveryQueue::Push(const BatchMsg& batch, bool append) {
  std::lock_guard<std::mutex> l(mu_);
  if (append) delivered_.push_back(batch);
  if (batch.is_last) end_ = true;
  if (consumer_waiting_ > 0) cv_.notify_all();  // no syscall while nobody sleeps
  return delivered_.size();
}

void DeliveryQueue::End() {
  std::lock_guard<std::mutex> l(mu_);
  end_ = true;
  if (consumer_waiting_ > 0) cv_.notify_all();
}

bool DeliveryQueue::ended() const {
  std::lock_guard<std::mutex> l(mu_);
  return end_;
}

void DeliveryQueue::Fail(absl::Status status) {
  std::lock_guard<std::mutex> l(mu_);
  if (status_.ok()) status_ = std::move(status);
  cv_.notify_all();  // wakes Pop()
}

void DeliveryQueue::Cancel() {
  std::lock_guard<std::mutex> l(mu_);
  cancelled_ = true;
  cv_.notify_all();  // re-evaluates Pop()'s wait condition
}

void DeliveryQueue::AddCorruptMessage(absl::string_view message) {
  std::lock_guard<std::mutex> l(mu_);
  if (corrupt_messages_.size() < kMaxCorruptMessages &&
      std::find(corrupt_messages_.begin(), corrupt_messages_.end(), message) ==
          corrupt_messages_.end()) {
    corrupt_messages_.emplace_back(message);
  }
}

absl::StatusOr<bool> DeliveryQueue::Pop(
    size_t max_leased, BatchMsg* out, Wait* wait,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::unique_lock<std::mutex> l(mu_);
  if (leased_.size() >= max_leased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the consumer holds ", leased_.size(), " leases; release one before asking for more"));
  }
  const int64_t start = NowNs();
  // Yield briefly before sleeping: a batch is usually microseconds away, and a futex sleep +
  // wake-up per batch costs more than the batch itself at small batch sizes.
  for (int spin = 0; spin < 64 && !ReadyLocked(); ++spin) {
    l.unlock();
    std::this_thread::yield();
    l.lock();
  }
  if (!ReadyLocked()) {
    ++consumer_waiting_;
    auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ReadyLocked(); };
    bool ok = true;
    if (deadline.has_value()) {
      ok = cv_.wait_until(l, *deadline, ready);
    } else {
      cv_.wait(l, ready);
    }
    --consumer_waiting_;
    if (!ok) {
      if (wait != nullptr) *wait = Wait{start, NowNs()};
      return absl::DeadlineExceededError("no batch yet; ask again");
    }
  }
  if (wait != nullptr) *wait = Wait{start, NowNs()};
  if (!status_.ok()) return status_;
  if (cancelled_) return absl::CancelledError("the pipeline was cancelled");
  if (delivered_.empty()) return false;
  *out = std::move(delivered_.front());
  delivered_.pop_front();
  leased_.emplace(out->id, out->payload);
  ++batches_delivered_;
  samples_delivered_ += out->payload->size;
  return true;
}

std::shared_ptr<BatchPayload> DeliveryQueue::TakeLease(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = leased_.find(id);
  if (it == leased_.end()) return nullptr;
  std::shared_ptr<BatchPayload> payload = std::move(it->second);
  leased_.erase(it);
  return payload;
}

DeliveryQueue::Counters DeliveryQueue::counters() const {
  std::lock_guard<std::mutex> l(mu_);
  return Counters{batches_delivered_, samples_delivered_, corrupt_messages_};
}

size_t DeliveryQueue::leased() const {
  std::lock_guard<std::mutex> l(mu_);
  return leased_.size();
}

}  // namespace sluice::pipeline_internal
