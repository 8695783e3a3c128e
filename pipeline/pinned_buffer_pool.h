// PinnedBufferPool: a fixed set of equally sized host buffers that batches are built in.
//
// Memory: page-locked memory of the device the batches are uploaded to (so the copies are truly
// asynchronous), or page-aligned host memory when batches stay on the host. All buffers
// are allocated by Create(); the pool never grows (DALI's grow-only pools are how users hit
// OOM), so `count * buffer_bytes` is the pool's whole footprint.
//
// Ownership: a PinnedBuffer handle owns one buffer until it is destroyed or Reset(); the pool
// must outlive every handle. Waiting for a free buffer (Acquire) is measured.
// Errors: Create returns kInvalidArgument for a zero count/size, kResourceExhausted when the
// allocation fails, and the device layer's errors (e.g. kInternal) for pinned memory.
// Thread safety: all pool methods are thread safe; a handle is used by one thread at a time.
#ifndef SLUICE_PIPELINE_PINNED_BUFFER_POOL_H_
#define SLUICE_PIPELINE_PINNED_BUFFER_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"

namespace sluice {

class PinnedBufferPool;

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept { *this = std::move(o); }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Reset(); }

  bool valid() const { return pool_ != nullptr; }
  char* data() const { return data_; }
  size_t size() const;
  uint32_t index() const { return index_; }
  // Returns the buffer to its pool (no-op on an empty handle).
  void Reset();

 private:
  friend class PinnedBufferPool;
  PinnedBuffer(PinnedBufferPool* pool, uint32_t index, char* data)
      : pool_(pool), index_(index), data_(data) {}
  PinnedBufferPool* pool_ = nullptr;
  uint32_t index_ = 0;
  char* data_ = nullptr;
};

class PinnedBufferPool {
 public:
  // `pin_for`: the device the buffers are uploaded to; its pinned host memory is used
  // (borrowed: the device must outlive the pool). Null: page-aligned host memory.
  static absl::StatusOr<std::unique_ptr<PinnedBufferPool>> Create(
      uint32_t count, size_t buffer_bytes, device::Device* pin_for = nullptr);
  ~PinnedBufferPool();  // every handle must have been returned
  PinnedBufferPool(const PinnedBufferPool&) = delete;
  PinnedBufferPool& operator=(const PinnedBufferPool&) = delete;

  // Blocks until a buffer is free; the time blocked is added to wait_ns().
  PinnedBuffer Acquire();
  // A free buffer, or nullopt when all are in use.
  std::optional<PinnedBuffer> TryAcquire();

  uint32_t count() const { return static_cast<uint32_t>(buffers_.size()); }
  size_t buffer_bytes() const { return buffer_bytes_; }
  bool pinned() const { return pinned_; }
  uint32_t in_use() const;
  uint32_t high_water() const;  // most buffers ever in use at once
  int64_t wait_ns() const;      // total time Acquire() blocked
  uint64_t waits() const;       // Acquire() calls that had to block
  uint32_t waiting() const;     // Acquire() calls blocked right now
  // Zeroes high_water, wait_ns and waits (a pool reused by another pipeline, pool_cache.h).
  void ResetCounters();

 private:
  friend class PinnedBuffer;
  PinnedBufferPool(size_t buffer_bytes, bool pinned)
      : buffer_bytes_(buffer_bytes), pinned_(pinned) {}
  void Return(uint32_t index);
  PinnedBuffer TakeLocked();  // mu_ held

  const size_t buffer_bytes_;
  const bool pinned_;
  std::vector<char*> buffers_;
  std::vector<device::Buffer> pinned_buffers_;  // owns buffers_ when pinned
  // std::mutex: visible to ThreadSanitizer (Debian's Abseil is not instrumented).
  mutable std::mutex mu_;
  std::condition_variable returned_;
  std::vector<uint32_t> free_;
  uint32_t high_water_ = 0;
  int64_t wait_ns_ = 0;
  uint64_t waits_ = 0;
  uint32_t waiting_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_PINNED_BUFFER_POOL_H_
