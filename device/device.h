// The device layer: one narrow interface to an accelerator, below the pipeline and the engine.
//
//   Device   opens one accelerator; creates streams and events; allocates device memory and
//            pinned (page-locked) host memory
//   Stream   an in-order queue of work on the device: async copies, event records and waits,
//            host callbacks
//   Event    a point in a stream. Another stream can wait on it (on the device: no host thread
//            blocks); timing events give the device time between two of them.
//
// The pipeline's upload stage, the device batch ring, the trainer's waits and slot releases
// and the H2D ceiling are written once against this interface. Implementations: CUDA
// (device/cuda/, the only code outside engine/cuda that includes the CUDA runtime) and a
// simulated accelerator in host memory (device/sim/, docs/sim.md); every method is virtual and
// none names CUDA. A device is named by a DeviceSpec (device/device_spec.h).
//
// Ordering is CUDA's: work on one stream runs in enqueue order; a Wait(event) makes every
// later operation of that stream wait until the work recorded before the event completed;
// a callback runs after every earlier operation of its stream completed.
//
// Ownership: a Device must outlive every Stream, Event and buffer it created. Streams, events
// and buffers are owned by their unique_ptr / RAII handle; destroying a stream first waits
// for its work. Pointers returned by DeviceBuffer::data() stay valid while the buffer lives.
// Errors: every device call is checked; a failure is kInternal naming the call, the file and
// the line (kResourceExhausted for out-of-memory), never a crash. OpenCudaDevice returns
// kUnavailable, saying why, without CUDA support, a driver or the device.
// Thread safety: a Device and its Events may be used from any thread. A Stream is fed by one
// thread at a time (its owner); callbacks run on a platform thread and must not call back
// into the device layer.
#ifndef SLUICE_DEVICE_DEVICE_H_
#define SLUICE_DEVICE_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/device_spec.h"

namespace sluice::device {

class Device;

// Device memory, or pinned host memory, owned by this handle. Move-only.
class Buffer {
 public:
  enum class Kind : uint8_t { kDevice, kPinnedHost };
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Kind kind() const { return kind_; }
  void Reset();  // frees the memory (no-op when empty)

 private:
  friend class Device;
  Buffer(Device* device, Kind kind, void* data, size_t size)
      : device_(device), kind_(kind), data_(data), size_(size) {}
  Device* device_ = nullptr;
  Kind kind_ = Kind::kDevice;
  void* data_ = nullptr;
  size_t size_ = 0;
};

class Event {
 public:
  virtual ~Event() = default;
  // Blocks the calling thread until the work recorded before this event has completed.
  virtual absl::Status Synchronize() = 0;
  // Device time from `start` to this event, both recorded with timing and completed.
  // kFailedPrecondition when either lacks timing.
  virtual absl::StatusOr<int64_t> NanosSince(const Event& start) const = 0;
  // When the last record of this timing event completed, on the host's steady clock
  // (std::chrono::steady_clock nanoseconds, as pipeline/stage_stats.h NowNs), so device work
  // can be drawn on the host timeline. kFailedPrecondition without timing or before the
  // record completed.
  virtual absl::StatusOr<int64_t> HostNanos() const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  // Enqueues a copy of `bytes` from host `src` to device `dst` (asynchronous for pinned
  // `src`; pageable memory is staged by the platform). `src` must stay valid until the copy
  // has completed (a later event or callback on this stream says when).
  virtual absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Enqueues a copy from device `src` to host `dst`.
  virtual absl::Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  // Records `event` at this point of the stream.
  virtual absl::Status Record(Event* event) = 0;
  // Makes later work of this stream wait for `event` (on the device; returns at once).
  virtual absl::Status Wait(Event* event) = 0;
  // Runs `fn` on a platform thread once all earlier work of this stream has completed; the
  // stream waits for it. `fn` must not call into the device layer. Callbacks of all streams of
  // a device may run one at a time (CUDA's host functions may be serialized): a slow one can
  // hold other streams' callbacks, so device time is held with Delay, not a spinning callback.
  virtual absl::Status AddCallback(std::function<void()> fn) = 0;
  // Holds this stream for `us` microseconds of device time, as a spinning kernel does (CUDA: a
  // one-thread spin kernel; sim: a modelled wait on the stream). Later work of this stream
  // starts after it; other streams and callbacks are not held. Used for injected delays.
  virtual absl::Status Delay(int64_t us) = 0;
  // Blocks until all enqueued work has completed.
  virtual absl::Status Synchronize() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // "cuda:0 (NVIDIA H200, sm_90)".
  virtual std::string name() const = 0;
  // Platform::kCuda or Platform::kSim (never kAuto or kCpu).
  virtual Platform platform() const = 0;
  virtual int ordinal() const = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream() = 0;
  // `timing`: the event can be used with NanosSince (a little slower to record).
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent(bool timing) = 0;
  virtual absl::StatusOr<Buffer> Allocate(size_t bytes) = 0;
  // Page-locked host memory: copies from it to the device are truly asynchronous.
  virtual absl::StatusOr<Buffer> AllocatePinnedHost(size_t bytes) = 0;
  // Re-takes the clock anchor that Event::HostNanos places events by (device/clock_anchor.h)
  // when it is older than `max_age_ns` (0: always). Events are placed less precisely the older
  // their anchor; MeasuredBackend calls it every epoch. Blocks for a few microseconds when it
  // re-takes. The simulated device stamps events with the host clock itself: a no-op there.
  virtual absl::Status RefreshClockAnchor(int64_t max_age_ns) {
    (void)max_age_ns;
    return absl::OkStatus();
  }

 protected:
  Device() = default;
  Buffer MakeBuffer(Buffer::Kind kind, void* data, size_t size) {
    return Buffer(this, kind, data, size);
  }

 private:
  friend class Buffer;
  // Frees memory from Allocate (kDevice) or AllocatePinnedHost (kPinnedHost).
  virtual void Free(Buffer::Kind kind, void* data) = 0;
};

// CUDA devices usable by this process: 0 without CUDA support, a driver or a device.
int CudaDeviceCount();
// OK when CUDA device `ordinal` is usable; otherwise kUnavailable saying why, e.g.
// "no CUDA device: cudaGetDeviceCount failed: cudaErrorInsufficientDriver (...)".
absl::Status CudaDeviceStatus(int ordinal);
// Opens CUDA device `ordinal` (makes it current on the calling thread).
absl::StatusOr<std::unique_ptr<Device>> OpenCudaDevice(int ordinal);

}  // namespace sluice::device

#endif  // SLUICE_DEVICE_DEVICE_H_
