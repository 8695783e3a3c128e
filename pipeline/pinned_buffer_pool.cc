#include "pipeline/pinned_buffer_pool.h"

#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pipeline/stage_stats.h"

namespace sluice {
namespace {
constexpr size_t kPage = 4096;
}  // namespace

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    pool_ = o.pool_;
    index_ = o.index_;
    data_ = o.data_;
    o.pool_ = nullptr;
    o.data_ = nullptr;
  }
  return *this;
}

size_t PinnedBuffer::size() const { return pool_ ? pool_->buffer_bytes() : 0; }

void PinnedBuffer::Reset() {
  if (pool_ != nullptr) {
    pool_->Return(index_);
    pool_ = nullptr;
    data_ = nullptr;
  }
}

absl::StatusOr<std::unique_ptr<PinnedBufferPool>> PinnedBufferPool::Create(
    uint32_t count, size_t buffer_bytes, device::Device* pin_for) {
  if (count == 0 || buffer_bytes == 0) {
    return absl::InvalidArgumentError("PinnedBufferPool needs at least one non-empty buffer");
  }
  std::unique_ptr<PinnedBufferPool> pool(new PinnedBufferPool(buffer_bytes, pin_for != nullptr));
  const size_t rounded = (buffer_bytes + kPage - 1) / kPage * kPage;
  for (uint32_t i = 0; i < count; ++i) {
    if (pin_for != nullptr) {
      absl::StatusOr<device::Buffer> b = pin_for->AllocatePinnedHost(rounded);
      if (!b.ok()) return b.status();
      pool->buffers_.push_back(static_cast<char*>(b->data()));
      pool->pinned_buffers_.push_back(*std::move(b));
      continue;
    }
    void* p = std::aligned_alloc(kPage, rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("allocating ", rounded, " bytes failed"));
    }
    // Touch every page now: a page's first write costs a fault (1-3 us on a VM), and left to
    // the run it would land in whichever preprocess op writes the batch first, inflating that
    // op's share and the stage's busy time for the first pool_size batches.
    std::memset(p, 0, rounded);
    pool->buffers_.push_back(static_cast<char*>(p));
  }
  std::lock_guard<std::mutex> l(pool->mu_);
  // Hand out low indices first (a LIFO free list keeps recently used buffers cache-warm).
  for (uint32_t i = count; i-- > 0;) pool->free_.push_back(i);
  return pool;
}

PinnedBufferPool::~PinnedBufferPool() {
  if (pinned_) return;  // pinned_buffers_ frees them
  for (char* p : buffers_) std::free(p);
}

PinnedBuffer PinnedBufferPool::TakeLocked() {
  const uint32_t i = free_.back();
  free_.pop_back();
  const uint32_t used = count() - static_cast<uint32_t>(free_.size());
  if (used > high_water_) high_water_ = used;
  return PinnedBuffer(this, i, buffers_[i]);
}

PinnedBuffer PinnedBufferPool::Acquire() {
  std::unique_lock<std::mutex> l(mu_);
  if (free_.empty()) {
    const int64_t start = NowNs();
    ++waiting_;
    returned_.wait(l, [this] { return !free_.empty(); });
    --waiting_;
    wait_ns_ += NowNs() - start;
    ++waits_;
  }
  return TakeLocked();
}

std::optional<PinnedBuffer> PinnedBufferPool::TryAcquire() {
  std::lock_guard<std::mutex> l(mu_);
  if (free_.empty()) return std::nullopt;
  return TakeLocked();
}

void PinnedBufferPool::Return(uint32_t index) {
  std::lock_guard<std::mutex> l(mu_);
  free_.push_back(index);
  returned_.notify_one();
}

uint32_t PinnedBufferPool::in_use() const {
  std::lock_guard<std::mutex> l(mu_);
  return count() - static_cast<uint32_t>(free_.size());
}
uint32_t PinnedBufferPool::high_water() const {
  std::lock_guard<std::mutex> l(mu_);
  return high_water_;
}
int64_t PinnedBufferPool::wait_ns() const {
  std::lock_guard<std::mutex> l(mu_);
  return wait_ns_;
}
uint32_t PinnedBufferPool::waiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return waiting_;
}
void PinnedBufferPool::ResetCounters() {
  std::lock_guard<std::mutex> l(mu_);
  high_water_ = count() - static_cast<uint32_t>(free_.size());
  wait_ns_ = 0;
  waits_ = 0;
}
uint64_t PinnedBufferPool::waits() const {
  std::lock_guard<std::mutex> l(mu_);
  return waits_;
}

}  // namespace sluice
