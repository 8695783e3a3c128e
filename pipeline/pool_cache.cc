#include "pipeline/pool_cache.h"

#include <utility>

#include "pipeline/internal/frame_buffer_pool.h"

namespace sluice {

PoolCache::PoolCache() = default;
PoolCache::~PoolCache() = default;

std::unique_ptr<PinnedBufferPool> PoolCache::TakeBatchPool(uint32_t count, size_t buffer_bytes,
                                                           const device::Device* pin_for) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = batch_pools_.begin(); it != batch_pools_.end(); ++it) {
    if (it->pin_for == pin_for && it->pool->count() == count &&
        it->pool->buffer_bytes() == buffer_bytes && it->pool->pinned() == (pin_for != nullptr)) {
      std::unique_ptr<PinnedBufferPool> pool = std::move(it->pool);
      batch_pools_.erase(it);
      pool->ResetCounters();
      ++reuses_;
      return pool;
    }
  }
  return nullptr;
}

void PoolCache::GiveBatchPool(std::unique_ptr<PinnedBufferPool> pool,
                              const device::Device* pin_for) {
  if (pool == nullptr || pool->in_use() != 0) return;  // a leased buffer: not reusable
  std::lock_guard<std::mutex> l(mu_);
  if (batch_pools_.size() >= kMaxPoolsPerKind) batch_pools_.erase(batch_pools_.begin());
  batch_pools_.push_back(BatchEntry{std::move(pool), pin_for});
}

std::unique_ptr<pipeline_internal::FrameBufferPool> PoolCache::TakeFramePool(size_t buffer_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = frame_pools_.begin(); it != frame_pools_.end(); ++it) {
    if ((*it)->buffer_bytes() == buffer_bytes) {
      std::unique_ptr<pipeline_internal::FrameBufferPool> pool = std::move(*it);
      frame_pools_.erase(it);
      ++reuses_;
      return pool;
    }
  }
  return nullptr;
}

void PoolCache::GiveFramePool(std::unique_ptr<pipeline_internal::FrameBufferPool> pool) {
  if (pool == nullptr || pool->free_buffers() != pool->allocated()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (frame_pools_.size() >= kMaxPoolsPerKind) frame_pools_.erase(frame_pools_.begin());
  frame_pools_.push_back(std::move(pool));
}

uint64_t PoolCache::reuses() const {
  std::lock_guard<std::mutex> l(mu_);
  return reuses_;
}

}  // namespace sluice
