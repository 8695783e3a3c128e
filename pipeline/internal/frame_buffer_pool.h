// FrameBufferPool: recycled buffers for decoded frames, so the decompress hot path does not
// malloc/free and page-fault a fresh ~200 KB buffer per frame (the pipeline keeps a second
// pool for the stored frames the reader fills).
//
// Every buffer is `buffer_bytes` long (the largest raw, or stored, frame). Take() hands out a
// returned buffer when there is one and allocates otherwise, so the pool grows to the most buffers
// ever out at once (for the pipeline: at most frame budget + decompress threads) and then
// stops allocating.
// Ownership: a taken buffer belongs to the caller until it is given back with Return(); the
// pool frees the buffers it holds when destroyed.
// Errors: none (allocation failure throws std::bad_alloc, as new does).
// Thread safety: thread safe; one mutex, held only to push or pop a buffer (allocation
// happens outside it).
#ifndef SLUICE_PIPELINE_INTERNAL_FRAME_BUFFER_POOL_H_
#define SLUICE_PIPELINE_INTERNAL_FRAME_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sluice::pipeline_internal {

class FrameBufferPool {
 public:
  explicit FrameBufferPool(size_t buffer_bytes) : buffer_bytes_(buffer_bytes) {}
  FrameBufferPool(const FrameBufferPool&) = delete;
  FrameBufferPool& operator=(const FrameBufferPool&) = delete;

  // A buffer of buffer_bytes(): a returned one if any, else a new one.
  std::unique_ptr<char[]> Take();
  // Gives `buffer` (from Take(); null is ignored) back for reuse.
  void Return(std::unique_ptr<char[]> buffer);

  size_t buffer_bytes() const { return buffer_bytes_; }
  // Buffers allocated so far (taken and free together).
  uint64_t allocated() const;
  // Buffers waiting to be taken again.
  size_t free_buffers() const;

 private:
  const size_t buffer_bytes_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<char[]>> free_;  // guarded by mu_
  uint64_t allocated_ = 0;                     // guarded by mu_
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_FRAME_BUFFER_POOL_H_
