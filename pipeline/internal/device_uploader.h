// DeviceUploader: the CUDA half of the pipeline's upload stage (pipeline/cuda/).
//
// A dedicated copy stream and a ring of `ring_depth` device batch slots, each with a "ready"
// event (recorded after the batch's copies; the consumer's compute stream waits on it) and a
// "released" event (recorded on the consumer's stream when its lease is released; the next
// copy into the slot waits on it on the GPU, so no host thread ever blocks on the device).
//
// Errors: every CUDA call is checked; failures are kInternal naming the call, file and line;
// Create returns kUnavailable without CUDA support or without a device.
// Thread safety: Enqueue is called by one thread at a time (the serial upload node or the
// consumer thread, serialized by the pipeline); ReleaseSlot and CopyNs by the consumer.
#ifndef SLUICE_PIPELINE_INTERNAL_DEVICE_UPLOADER_H_
#define SLUICE_PIPELINE_INTERNAL_DEVICE_UPLOADER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"

namespace sluice::pipeline_internal {

// True when sluice was built with CUDA and a device is usable (never crashes without one).
bool CudaDeviceAvailable();

class DeviceUploader {
 public:
  virtual ~DeviceUploader() = default;
  static absl::StatusOr<std::unique_ptr<DeviceUploader>> Create(int device, uint32_t ring_depth,
                                                                size_t sample_bytes,
                                                                size_t label_bytes);
  // Enqueues the copy of one host batch into `slot`, then `done` on a CUDA driver thread
  // once the copy has completed (`done` must not call CUDA). `skip_copy` (what-if h2d) records
  // the events without copying.
  virtual absl::Status Enqueue(uint32_t slot, const void* samples, size_t sample_bytes,
                               const int32_t* labels, size_t label_bytes, bool skip_copy,
                               std::function<void()> done) = 0;
  virtual const void* slot_samples(uint32_t slot) const = 0;
  virtual const int32_t* slot_labels(uint32_t slot) const = 0;
  virtual void* ready_event(uint32_t slot) const = 0;  // cudaEvent_t
  // The consumer is done with `slot`; `stream` (cudaStream_t, may be null) is where its reads
  // were enqueued.
  virtual absl::Status ReleaseSlot(uint32_t slot, void* stream) = 0;
  // Duration of the last copy into `slot`, from its events; call after `done` ran.
  virtual absl::StatusOr<int64_t> CopyNs(uint32_t slot) = 0;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_DEVICE_UPLOADER_H_
