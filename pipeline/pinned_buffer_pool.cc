#include "pipeline/pinned_buffer_pool.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pipeline/stage_stats.h"

#if SLUICE_PIPELINE_CUDA
#include <cuda_runtime.h>
#endif

namespace sluice {
namespace {
constexpr size_t kPage = 4096;

bool CudaDevicePresent() {
#if SLUICE_PIPELINE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return n > 0;
#else
  return false;
#endif
}
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

absl::StatusOr<std::unique_ptr<PinnedBufferPool>> PinnedBufferPool::Create(uint32_t count,
                                                                           size_t buffer_bytes,
                                                                           Memory memory) {
  if (count == 0 || buffer_bytes == 0) {
    return absl::InvalidArgumentError("PinnedBufferPool needs at least one non-empty buffer");
  }
  bool pinned = false;
  if (memory != Memory::kPageable) {
    pinned = CudaDevicePresent();
    if (!pinned && memory == Memory::kPinned) {
      return absl::UnavailableError("pinned memory requested but no CUDA device is present");
    }
  }
  std::unique_ptr<PinnedBufferPool> pool(new PinnedBufferPool(buffer_bytes, pinned));
  const size_t rounded = (buffer_bytes + kPage - 1) / kPage * kPage;
  for (uint32_t i = 0; i < count; ++i) {
    void* p = nullptr;
#if SLUICE_PIPELINE_CUDA
    if (pinned) {
      cudaError_t err = cudaHostAlloc(&p, rounded, cudaHostAllocPortable);
      if (err != cudaSuccess) {
        return absl::ResourceExhaustedError(absl::StrCat("cudaHostAlloc of ", rounded,
                                                         " bytes failed: ", cudaGetErrorString(err)));
      }
    }
#endif
    if (!pinned) {
      p = std::aligned_alloc(kPage, rounded);
      if (p == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("allocating ", rounded, " bytes failed"));
      }
    }
    pool->buffers_.push_back(static_cast<char*>(p));
  }
  std::lock_guard<std::mutex> l(pool->mu_);
  // Hand out low indices first (a LIFO free list keeps recently used buffers cache-warm).
  for (uint32_t i = count; i-- > 0;) pool->free_.push_back(i);
  return pool;
}

PinnedBufferPool::~PinnedBufferPool() {
  for (char* p : buffers_) {
#if SLUICE_PIPELINE_CUDA
    if (pinned_) {
      cudaFreeHost(p);
      continue;
    }
#endif
    std::free(p);
  }
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
    returned_.wait(l, [this] { return !free_.empty(); });
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
uint64_t PinnedBufferPool::waits() const {
  std::lock_guard<std::mutex> l(mu_);
  return waits_;
}

}  // namespace sluice
