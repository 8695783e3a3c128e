// DeviceAllocator: cudaMalloc/cudaFree with a MemoryTag on every allocation, feeding a
// MemoryLedger so that MemoryReport shows what the CUDA backend really holds per tag.
//
// The backend allocates everything once, at creation (nothing per step), so the report's
// parameters/gradients/optimizer state/activations equal ComputeMemoryFormula exactly in every
// precision mode; reduced-precision operand copies are tagged kWorkspace, staging and the
// normalized input kInputBatches (see docs/cuda.md).
//
// Ownership: owns every block it returned; FreeAll() or the destructor frees them (the caller
// must have synchronized the device first). Errors: kResourceExhausted when cudaMalloc runs out
// of memory (message names the tag and size), otherwise as cudaCheck.
// Thread safety: one thread at a time (the ledger itself is thread safe).
#ifndef SLUICE_ENGINE_CUDA_DEVICE_ALLOCATOR_H_
#define SLUICE_ENGINE_CUDA_DEVICE_ALLOCATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/memory.h"

namespace sluice::cuda_internal {

class DeviceAllocator {
 public:
  DeviceAllocator() = default;
  ~DeviceAllocator() { FreeAll(); }
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // `bytes` of device memory (256-byte aligned, uninitialized); bytes == 0 gives nullptr.
  absl::StatusOr<void*> Allocate(MemoryTag tag, int64_t bytes);
  template <typename T>
  absl::StatusOr<T*> AllocateArray(MemoryTag tag, int64_t count) {
    auto p = Allocate(tag, count * static_cast<int64_t>(sizeof(T)));
    if (!p.ok()) return p.status();
    return static_cast<T*>(*p);
  }
  void FreeAll();
  MemoryReport report() const { return ledger_.report(); }

 private:
  struct Block {
    void* ptr;
    MemoryTag tag;
    int64_t bytes;
  };
  std::vector<Block> blocks_;
  MemoryLedger ledger_;
};

}  // namespace sluice::cuda_internal

#endif  // SLUICE_ENGINE_CUDA_DEVICE_ALLOCATOR_H_
