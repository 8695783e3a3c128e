#include "engine/cuda/device_allocator.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_check.h"

namespace sluice::cuda_internal {

absl::StatusOr<void*> DeviceAllocator::Allocate(MemoryTag tag, int64_t bytes) {
  if (bytes < 0) return absl::InvalidArgumentError("DeviceAllocator: negative size");
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  absl::Status s =
      CudaStatus(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc", __FILE__, __LINE__);
  if (!s.ok()) {
    ClearLastCudaError();
    return absl::Status(s.code(), absl::StrCat("allocating ", bytes, " bytes of ",
                                               MemoryTagName(tag), ": ", s.message()));
  }
  blocks_.push_back({p, tag, bytes});
  ledger_.Add(tag, bytes);
  return p;
}

void DeviceAllocator::FreeAll() {
  for (const Block& b : blocks_) {
    cudaFree(b.ptr);  // errors here (device lost) leave nothing to recover; ignore
    ledger_.Remove(b.tag, b.bytes);
  }
  blocks_.clear();
}

}  // namespace sluice::cuda_internal
