// Reading and writing one value of each ElementType as a float, with torch's conversions:
// f16 is IEEE binary16 and bf16 the upper half of a binary32, both rounded to nearest even;
// u8 truncates toward zero like a C++ cast (tensor.to(torch.uint8)) and saturates where that
// cast is undefined (below -1 or from 256 up; NaN gives 0).
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_ELEMENTS_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_ELEMENTS_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "pipeline/convert.h"
#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

float HalfToFloat(uint16_t h);

using ::sluice::FloatToBFloat16;  // pipeline/convert.h
inline float BFloat16ToFloat(uint16_t b) {
  const uint32_t x = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
inline uint8_t FloatToU8(float f) {
  if (!(f > -1.0f)) return 0;  // also NaN
  if (f >= 256.0f) return 255;
  return static_cast<uint8_t>(f);
}

inline float LoadAsFloat(ElementType t, const void* p) {
  switch (t) {
    case ElementType::kU8:
      return *static_cast<const uint8_t*>(p);
    case ElementType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case ElementType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return BFloat16ToFloat(b);
    }
    case ElementType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
  return 0;
}

inline void StoreFromFloat(ElementType t, float f, void* p) {
  switch (t) {
    case ElementType::kU8:
      *static_cast<uint8_t*>(p) = FloatToU8(f);
      return;
    case ElementType::kF16: {
      const uint16_t h = FloatToHalf(f);
      std::memcpy(p, &h, 2);
      return;
    }
    case ElementType::kBF16: {
      const uint16_t b = FloatToBFloat16(f);
      std::memcpy(p, &b, 2);
      return;
    }
    case ElementType::kF32:
      std::memcpy(p, &f, 4);
      return;
  }
}

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_ELEMENTS_H_
