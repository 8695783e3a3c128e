#include "pipeline/internal/device_uploader.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {

absl::StatusOr<std::unique_ptr<DeviceUploader>> DeviceUploader::Create(device::Device* device,
                                                                       uint32_t ring_depth,
                                                                       size_t sample_bytes,
                                                                       size_t label_bytes) {
  if (device == nullptr) return absl::InvalidArgumentError("DeviceUploader: null device");
  if (ring_depth == 0) return absl::InvalidArgumentError("device_ring_depth must be >= 1");
  std::unique_ptr<DeviceUploader> u(new DeviceUploader(device));
  ASSIGN_OR_RETURN(u->stream_, device->CreateStream());
  u->slots_.resize(ring_depth);
  for (Slot& s : u->slots_) {
    ASSIGN_OR_RETURN(s.samples, device->Allocate(sample_bytes));
    ASSIGN_OR_RETURN(s.labels, device->Allocate(label_bytes));
    ASSIGN_OR_RETURN(s.copy_start, device->CreateEvent(/*timing=*/true));
    ASSIGN_OR_RETURN(s.ready, device->CreateEvent(/*timing=*/true));
    ASSIGN_OR_RETURN(s.released, device->CreateEvent(/*timing=*/false));
  }
  // Slots start zeroed (valid samples, label 0): a what-if h2d run skips the copies and reads
  // a slot as it is, so it must never hold uninitialized device memory.
  const std::vector<char> zeros(std::max(sample_bytes, label_bytes), 0);
  for (Slot& s : u->slots_) {
    RETURN_IF_ERROR(u->stream_->CopyToDevice(s.samples.data(), zeros.data(), sample_bytes));
    RETURN_IF_ERROR(u->stream_->CopyToDevice(s.labels.data(), zeros.data(), label_bytes));
  }
  RETURN_IF_ERROR(u->stream_->Synchronize());
  return u;
}

DeviceUploader::~DeviceUploader() {
  // Copies in flight write into the slots and callbacks reference the pipeline: finish them
  // before the memory goes.
  if (stream_ != nullptr) (void)stream_->Synchronize();
}

absl::Status DeviceUploader::Enqueue(uint32_t slot, const void* samples, size_t sample_bytes,
                                     const int32_t* labels, size_t label_bytes, bool skip_copy,
                                     int64_t delay_us, std::function<void()> done) {
  Slot& s = slots_[slot];
  if (s.release_pending) {  // the device, not a host thread, waits for the consumer's step
    RETURN_IF_ERROR(stream_->Wait(s.released.get()));
    s.release_pending = false;
  }
  RETURN_IF_ERROR(stream_->Record(s.copy_start.get()));
  if (!skip_copy) {
    RETURN_IF_ERROR(stream_->CopyToDevice(s.samples.data(), samples, sample_bytes));
    RETURN_IF_ERROR(stream_->CopyToDevice(s.labels.data(), labels, label_bytes));
  }
  // Device time, as a slower copy: a spinning callback could hold other streams' callbacks.
  if (delay_us > 0) RETURN_IF_ERROR(stream_->Delay(delay_us));
  RETURN_IF_ERROR(stream_->Record(s.ready.get()));
  return stream_->AddCallback(std::move(done));
}

absl::Status DeviceUploader::ReleaseSlot(uint32_t slot, device::Stream* stream) {
  if (stream == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(stream->Record(slots_[slot].released.get()));
  slots_[slot].release_pending = true;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> DeviceUploader::CopySpan(uint32_t slot) const {
  ASSIGN_OR_RETURN(const int64_t start, slots_[slot].copy_start->HostNanos());
  ASSIGN_OR_RETURN(const int64_t end, slots_[slot].ready->HostNanos());
  return std::make_pair(start, end);
}

}  // namespace sluice::pipeline_internal
