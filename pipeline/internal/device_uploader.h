// DeviceUploader: the upload stage's device half, written once against the device layer
// (device/device.h), so it runs the same code on every device implementation.
//
// A dedicated copy stream and a ring of `ring_depth` device batch slots. Each slot has a
// "copy start" and a "ready" timing event around its copies (the consumer's compute stream
// waits on "ready"; the pair gives the copy's device time) and a "released" event, recorded on
// the consumer's stream when its lease is released: the next copy into the slot waits on it on
// the device, so no host thread ever blocks on the device.
//
// Ownership: borrows the Device, which must outlive the uploader. Slot memory stays valid
// until the uploader is destroyed (the destructor waits for the copy stream).
// Errors: the device layer's (kInternal naming the call, kResourceExhausted for out of memory).
// Thread safety: Enqueue and ReleaseSlot are serialized by the caller (the pipeline's device
// ring lock); slot accessors are read-only after Create; CopyNs is called once `done` ran.
#ifndef SLUICE_PIPELINE_INTERNAL_DEVICE_UPLOADER_H_
#define SLUICE_PIPELINE_INTERNAL_DEVICE_UPLOADER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"

namespace sluice::pipeline_internal {

class DeviceUploader {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceUploader>> Create(device::Device* device,
                                                                uint32_t ring_depth,
                                                                size_t sample_bytes,
                                                                size_t label_bytes);
  ~DeviceUploader();

  // Enqueues the copy of one host batch into `slot` (after the slot's previous reader
  // released it), then `done` on a platform thread once the copy has completed (`done` must
  // not call into the device layer). `skip_copy` (what-if h2d, or an empty batch) records the
  // events without copying. `delay_us` (the injected h2d delay) holds the copy stream that
  // long between the copy's events, so it counts as copy time on every device.
  absl::Status Enqueue(uint32_t slot, const void* samples, size_t sample_bytes,
                       const int32_t* labels, size_t label_bytes, bool skip_copy, int64_t delay_us,
                       std::function<void()> done);
  const void* slot_samples(uint32_t slot) const { return slots_[slot].samples.data(); }
  const int32_t* slot_labels(uint32_t slot) const {
    return static_cast<const int32_t*>(slots_[slot].labels.data());
  }
  // The compute stream waits on this before reading the slot.
  device::Event* ready_event(uint32_t slot) const { return slots_[slot].ready.get(); }
  // The consumer is done with `slot`; `stream` (may be null: nothing enqueued still reads the
  // slot) is where its reads were enqueued.
  absl::Status ReleaseSlot(uint32_t slot, device::Stream* stream);
  // The last copy into `slot` on the host clock (start, end), from its events: the device's
  // copy time placed on the host timeline. Call after `done` ran.
  absl::StatusOr<std::pair<int64_t, int64_t>> CopySpan(uint32_t slot) const;

 private:
  struct Slot {
    device::Buffer samples;
    device::Buffer labels;
    std::unique_ptr<device::Event> copy_start;  // timing events bracket the copies
    std::unique_ptr<device::Event> ready;
    std::unique_ptr<device::Event> released;  // the consumer's reads finished
    bool release_pending = false;
  };
  explicit DeviceUploader(device::Device* device) : device_(device) {}

  device::Device* device_;
  std::unique_ptr<device::Stream> stream_;
  std::vector<Slot> slots_;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_DEVICE_UPLOADER_H_
