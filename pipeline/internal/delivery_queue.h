// DeliveryQueue: the hand-over between the pipeline's (serial, in-order) deliver stage and its
// consumer. Holds the delivered batches in order, the end of the stream, the first error,
// cancellation, the batches the consumer holds (its leases), and the delivery counters and
// corrupt-frame messages that Stats() reports.
//
// The consumer's Pop() yields a few times before it sleeps, and Push() notifies only a
// sleeping consumer (see Pop() in the .cc: a measured performance fix).
//
// Ownership: owns the queued batches and the leased payloads until TakeLease() hands one back.
// Errors: Pop() returns the first error given to Fail(), kCancelled after Cancel(), and
// kFailedPrecondition when the consumer already holds `max_leased` leases.
// Thread safety: thread safe; one mutex guards all state (one producer and one consumer are
// expected, but not required).
#ifndef SLUICE_PIPELINE_INTERNAL_DELIVERY_QUEUE_H_
#define SLUICE_PIPELINE_INTERNAL_DELIVERY_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/internal/pipeline_messages.h"

namespace sluice::pipeline_internal {

class DeliveryQueue {
 public:
  struct Counters {
    uint64_t batches_delivered = 0;  // handed out by Pop()
    uint64_t samples_delivered = 0;
    std::vector<std::string> corrupt_messages;  // distinct, first kMaxCorruptMessages
  };
  // When the consumer started and stopped waiting in Pop().
  struct Wait {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };
  static constexpr size_t kMaxCorruptMessages = 16;

  DeliveryQueue() = default;
  DeliveryQueue(const DeliveryQueue&) = delete;
  DeliveryQueue& operator=(const DeliveryQueue&) = delete;

  // Producer side. Appends `batch` (if `append`: batches all of whose samples were skipped are
  // not delivered, but may still end the stream) and ends the stream after it when
  // batch.is_last. Returns how many batches are queued.
  size_t Push(const BatchMsg& batch, bool append);
  // Ends the stream (a pipeline with nothing to deliver).
  void End();
  // Keeps `status` if it is the first error, and wakes the consumer: Pop() returns it.
  void Fail(absl::Status status);
  // Wakes the consumer: Pop() returns kCancelled (unless an error came first).
  void Cancel();
  // Keeps a corrupt frame's message for Stats() (distinct ones, the first 16).
  void AddCorruptMessage(absl::string_view message);

  // Consumer side. Waits for the next batch, the end, an error or cancellation. On true the
  // batch is moved to `out` and its payload is leased until TakeLease(out->id); false: the
  // stream ended. `wait` (if not null) gets when the wait began and ended (not set when the
  // consumer holds too many leases). With a `deadline` (steady clock), returns
  // kDeadlineExceeded when nothing came by then; nothing is consumed and Pop() may be called
  // again.
  absl::StatusOr<bool> Pop(size_t max_leased, BatchMsg* out, Wait* wait,
                           std::optional<std::chrono::steady_clock::time_point> deadline = {});
  // Ends the lease of batch `id`: returns its payload, or null if it is not leased.
  std::shared_ptr<BatchPayload> TakeLease(uint64_t id);

  Counters counters() const;
  size_t leased() const;
  // Whether the stream's end is queued: every batch of the run was pushed (some may still wait
  // for the consumer).
  bool ended() const;

 private:
  bool ReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !delivered_.empty() || end_ || !status_.ok() || cancelled_;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int consumer_waiting_ ABSL_GUARDED_BY(mu_) = 0;  // consumers asleep on cv_
  std::deque<BatchMsg> delivered_ ABSL_GUARDED_BY(mu_);
  bool end_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<BatchPayload>> leased_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> corrupt_messages_ ABSL_GUARDED_BY(mu_);
  uint64_t batches_delivered_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t samples_delivered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_DELIVERY_QUEUE_H_
