// HostBuffer: a 64-byte aligned, zero-initialized host array whose bytes are recorded in a
// MemoryLedger under one tag for as long as it lives. Every allocation of the CPU backend goes
// through it, which is what makes MemoryReport agree with MemoryFormula.
// Ownership: owns its memory; the ledger must outlive the buffer. Movable, not copyable.
// Thread safety: as a plain array.
#ifndef SLUICE_ENGINE_CPU_INTERNAL_HOST_BUFFER_H_
#define SLUICE_ENGINE_CPU_INTERNAL_HOST_BUFFER_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "engine/memory.h"

namespace sluice::cpu_internal {

template <typename T>
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(MemoryLedger* ledger, MemoryTag tag, int64_t count)
      : ledger_(ledger), tag_(tag), count_(count) {
    if (count_ == 0) return;
    const size_t bytes = (static_cast<size_t>(count_) * sizeof(T) + 63) / 64 * 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
    ledger_->Add(tag_, this->bytes());
  }
  ~HostBuffer() { Reset(); }
  HostBuffer(HostBuffer&& o) noexcept { *this = std::move(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      ledger_ = std::exchange(o.ledger_, nullptr);
      tag_ = o.tag_;
      count_ = std::exchange(o.count_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return count_; }
  // The bytes recorded in the ledger: exactly count * sizeof(T) (alignment padding is not
  // counted, so the report equals the formula).
  int64_t bytes() const { return count_ * static_cast<int64_t>(sizeof(T)); }

 private:
  void Reset() {
    if (data_ != nullptr) {
      ledger_->Remove(tag_, bytes());
      std::free(data_);
      data_ = nullptr;
    }
  }
  MemoryLedger* ledger_ = nullptr;
  MemoryTag tag_ = MemoryTag::kWorkspace;
  int64_t count_ = 0;
  T* data_ = nullptr;
};

}  // namespace sluice::cpu_internal

#endif  // SLUICE_ENGINE_CPU_INTERNAL_HOST_BUFFER_H_
