#include "pipeline/internal/frame_buffer_pool.h"

#include <utility>

namespace sluice::pipeline_internal {

std::unique_ptr<char[]> FrameBufferPool::Take() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!free_.empty()) {
      std::unique_ptr<char[]> b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
    ++allocated_;
  }
  return std::unique_ptr<char[]>(new char[buffer_bytes_]);
}

void FrameBufferPool::Return(std::unique_ptr<char[]> buffer) {
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> l(mu_);
  free_.push_back(std::move(buffer));
}

uint64_t FrameBufferPool::allocated() const {
  std::lock_guard<std::mutex> l(mu_);
  return allocated_;
}

size_t FrameBufferPool::free_buffers() const {
  std::lock_guard<std::mutex> l(mu_);
  return free_.size();
}

}  // namespace sluice::pipeline_internal
