// PoolCache: the buffer pools of a finished pipeline, kept for the next pipeline over the same
// data. sluice.Loader builds one pipeline per pass (epoch); without this every pass allocates
// its batch buffers and decoded-frame buffers again, first-touches every page of them (about
// one page fault per 3 KB sample with float32 batches, 15% of a pass's CPU on a 2-vCPU VM) and,
// on a GPU, pins them again (cudaHostAlloc costs milliseconds per MB).
//
//   auto cache = std::make_shared<PoolCache>();
//   options.resources.pool_cache = cache;   // every pipeline built with these options
//
// A pipeline takes a cached pool whose shape (buffer count and size, pinned for which device)
// matches what it would allocate, and gives its pools back when it is destroyed. A pool is
// handed to one pipeline at a time; pipelines alive together allocate their own. The cache
// holds at most kMaxPoolsPerKind pools of each kind; a pool given back beyond that is freed.
//
// Ownership: the cache owns the pools it holds. A pinned pool borrows its device: the device
// must outlive the cache (sluice.Loader declares its device before its cache).
// Thread safety: thread safe (one mutex, held only to move a pool in or out).
#ifndef SLUICE_PIPELINE_POOL_CACHE_H_
#define SLUICE_PIPELINE_POOL_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "device/device.h"
#include "pipeline/pinned_buffer_pool.h"

namespace sluice {
namespace pipeline_internal {
class FrameBufferPool;
}  // namespace pipeline_internal

class PoolCache {
 public:
  static constexpr size_t kMaxPoolsPerKind = 2;

  PoolCache();
  ~PoolCache();
  PoolCache(const PoolCache&) = delete;
  PoolCache& operator=(const PoolCache&) = delete;

  // A cached batch pool of `count` buffers of `buffer_bytes`, pinned for `pin_for` (null: host
  // memory), with its counters reset; null when none matches.
  std::unique_ptr<PinnedBufferPool> TakeBatchPool(uint32_t count, size_t buffer_bytes,
                                                  const device::Device* pin_for);
  // `pool` must have every buffer returned.
  void GiveBatchPool(std::unique_ptr<PinnedBufferPool> pool, const device::Device* pin_for);

  // A cached frame pool of `buffer_bytes` buffers with every buffer free; null when none.
  std::unique_ptr<pipeline_internal::FrameBufferPool> TakeFramePool(size_t buffer_bytes);
  // `pool` must have every buffer returned (its free buffers are what the next pipeline reuses).
  void GiveFramePool(std::unique_ptr<pipeline_internal::FrameBufferPool> pool);

  // Pools handed out from the cache so far (tests and benchmarks check reuse with it).
  uint64_t reuses() const;

 private:
  struct BatchEntry {
    std::unique_ptr<PinnedBufferPool> pool;
    const device::Device* pin_for;
  };
  mutable std::mutex mu_;
  std::vector<BatchEntry> batch_pools_;                                           // guarded by mu_
  std::vector<std::unique_ptr<pipeline_internal::FrameBufferPool>> frame_pools_;  // guarded by mu_
  uint64_t reuses_ = 0;                                                           // guarded by mu_
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_POOL_CACHE_H_
