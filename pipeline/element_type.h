// The element types a sample can have, on their own: C++17 and free of absl, so that the CUDA
// kernels (compiled by nvcc as C++17) share the very enum the pipeline and the batches use.
#ifndef SLUICE_PIPELINE_ELEMENT_TYPE_H_
#define SLUICE_PIPELINE_ELEMENT_TYPE_H_

#include <cstddef>
#include <cstdint>

namespace sluice {

// Element types a sample can have after a transform. bf16 is bfloat16 (the upper half of an
// IEEE binary32, rounded to nearest even); f16 is IEEE binary16.
enum class ElementType : uint8_t { kU8 = 0, kF16 = 1, kBF16 = 2, kF32 = 3 };
inline constexpr size_t ElementSize(ElementType t) {
  return t == ElementType::kU8 ? 1 : (t == ElementType::kF32 ? 4 : 2);
}

}  // namespace sluice

#endif  // SLUICE_PIPELINE_ELEMENT_TYPE_H_
