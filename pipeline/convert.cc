#include "pipeline/convert.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"

namespace sluice {
namespace {
constexpr double kInv255 = 1.0 / 255.0;

// ifunc resolvers run before the sanitizer runtimes initialize (and crash under TSan), so
// sanitizer builds get the single portable version.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SLUICE_CONVERT_CLONES
#else
#define SLUICE_CONVERT_CLONES __attribute__((target_clones("avx2", "default")))
#endif

// The u8 -> f32 loops, cloned for AVX2 (picked at load time by the CPU): same IEEE operations
// in the same order as the scalar formula (no FMA contraction in ISO C++ mode), so the same bits.
SLUICE_CONVERT_CLONES void U8ToF32Scaled(const uint8_t* in, float* out,
                                                                    size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i] * kInv255);
}
SLUICE_CONVERT_CLONES void U8ToF32Normalized(const uint8_t* in,
                                                                        float* out, size_t n,
                                                                        float mean, float sd) {
  for (size_t i = 0; i < n; ++i) out[i] = (static_cast<float>(in[i] * kInv255) - mean) / sd;
}
}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: infinity
  if (e <= 0) {                                                // half subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // a carry rounds up into the exponent
  return static_cast<uint16_t>(h);
}

absl::StatusOr<SampleConverter> SampleConverter::Create(SampleDType source, H2DFormat format,
                                                        Normalization norm, size_t values) {
  if (!(norm.std != 0.0f) || !std::isfinite(norm.std) || !std::isfinite(norm.mean)) {
    return absl::InvalidArgumentError("normalization std must be finite and non-zero");
  }
  if (source == SampleDType::kF32 && format == H2DFormat::kU8) {
    return absl::InvalidArgumentError("--h2d-format u8 needs u8 samples; this split stores f32");
  }
  SampleConverter c;
  c.source_ = source;
  c.format_ = format;
  c.norm_ = norm;
  c.values_ = values;
  c.identity_ = norm.mean == 0.0f && norm.std == 1.0f;
  c.fast_f32_ = true;
  for (int v = 0; v < 256; ++v) {
    c.lut_f32_[v] = NormalizeU8(static_cast<uint8_t>(v), norm);
    c.lut_f16_[v] = FloatToHalf(c.lut_f32_[v]);
    // The vectorizable formula must agree with the reference on every input, else the table.
    const float scaled = static_cast<float>(static_cast<double>(v) * kInv255);
    const float fast = c.identity_ ? scaled : (scaled - norm.mean) / norm.std;
    if (std::memcmp(&fast, &c.lut_f32_[v], 4) != 0) c.fast_f32_ = false;
  }
  return c;
}

void SampleConverter::Convert(const char* src, void* dst, size_t count) const {
  const size_t n = values_ * count;
  if (source_ == SampleDType::kU8) {
    const uint8_t* in = reinterpret_cast<const uint8_t*>(src);
    switch (format_) {
      case H2DFormat::kU8:
        std::memcpy(dst, src, n);
        return;
      case H2DFormat::kF32: {
        float* out = static_cast<float*>(dst);
        if (fast_f32_ && identity_) {
          // x/255 correctly rounded: the double product is within 2^-52 of x/255, which is
          // never that close to a float rounding boundary (checked for all x in Create()).
          U8ToF32Scaled(in, out, n);
        } else if (fast_f32_) {
          U8ToF32Normalized(in, out, n, norm_.mean, norm_.std);
        } else {
          for (size_t i = 0; i < n; ++i) out[i] = lut_f32_[in[i]];
        }
        return;
      }
      case H2DFormat::kF16: {
        uint16_t* out = static_cast<uint16_t*>(dst);
        for (size_t i = 0; i < n; ++i) out[i] = lut_f16_[in[i]];
        return;
      }
    }
  }
  // f32 samples (little-endian on every platform we build for); memcpy avoids misaligned loads.
  for (size_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, src + i * 4, 4);
    const float y = NormalizeF32(x, norm_);
    if (format_ == H2DFormat::kF32) {
      static_cast<float*>(dst)[i] = y;
    } else {
      static_cast<uint16_t*>(dst)[i] = FloatToHalf(y);
    }
  }
}

void ConvertLabels(LabelDType type, const char* src, int32_t* dst, size_t count) {
  if (type == LabelDType::kU8) {
    const uint8_t* in = reinterpret_cast<const uint8_t*>(src);
    for (size_t i = 0; i < count; ++i) dst[i] = in[i];
  } else {
    std::memcpy(dst, src, count * sizeof(int32_t));
  }
}

}  // namespace sluice
