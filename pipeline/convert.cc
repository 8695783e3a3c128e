#include "pipeline/convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "common/cpu_isa.h"
#include "common/status_macros.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace sluice {
namespace {
constexpr double kInv255 = 1.0 / 255.0;

// The portable u8 -> f32 loops (CPUs without AVX2 + FMA, SLUICE_CPU_ISA=baseline, or where the
// vector kernel below is not proven): the scalar formula's IEEE operations in the same order (no
// FMA contraction in ISO C++ mode), so the same bits.
void U8ToF32Scaled(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i] * kInv255);
}
void U8ToF32Normalized(const uint8_t* in, float* out, size_t n, float mean, float sd) {
  for (size_t i = 0; i < n; ++i) out[i] = (static_cast<float>(in[i] * kInv255) - mean) / sd;
}

#if defined(__x86_64__)
// The AVX2 + FMA kernel, 8 values per iteration, single precision throughout (the portable
// loops above widen to double, 4 values per instruction and two conversions each: 300+ ns per
// 784-value sample on a 2-vCPU EPYC, more than the zstd decode of that sample).
//
// x / 255 correctly rounded without a division: q = x * fl(1/255) is within an ulp of it; the
// remainder r = x - 255 q is exact in one FMA, and q + r * fl(1/255) rounded once (a second
// FMA) is the correctly rounded quotient (one Newton step on the quotient; Markstein). Then
// (q - mean) * (1 / std) or (q - mean) / std, as IEEE single operations. Only used once
// SampleConverter::Create has run it on all 256 inputs and found every output bit-identical to
// the scalar reference (convert.h); f16 adds F16C's round-to-nearest-even conversion. Like the
// scalar reference, it assumes the default floating-point environment (round to nearest, no
// flush-to-zero or denormals-are-zero) on the threads that convert: nothing in sluice changes it.
enum class AffineMode { kIdentity, kMulInverse, kDivide };

__attribute__((target("avx2,fma"))) inline __m256 ScaleU8x8(const uint8_t* in) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
  const __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  const __m256 c = _mm256_set1_ps(1.0f / 255.0f);
  const __m256 q = _mm256_mul_ps(x, c);
  const __m256 r = _mm256_fnmadd_ps(q, _mm256_set1_ps(255.0f), x);  // x - 255 q, exact
  return _mm256_fmadd_ps(r, c, q);
}

template <AffineMode kMode>
__attribute__((target("avx2,fma"))) inline __m256 NormalizeU8x8(const uint8_t* in, __m256 mean,
                                                                __m256 k) {
  const __m256 q = ScaleU8x8(in);
  if constexpr (kMode == AffineMode::kIdentity) return q;
  if constexpr (kMode == AffineMode::kMulInverse) return _mm256_mul_ps(_mm256_sub_ps(q, mean), k);
  return _mm256_div_ps(_mm256_sub_ps(q, mean), k);
}

// Converts the first n - n % 8 values; the caller converts the rest from the reference table.
template <AffineMode kMode>
__attribute__((target("avx2,fma"))) size_t U8ToF32Avx2(const uint8_t* in, void* dst, size_t n,
                                                       float mean, float k) {
  float* out = static_cast<float*>(dst);
  const __m256 vm = _mm256_set1_ps(mean), vk = _mm256_set1_ps(k);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, NormalizeU8x8<kMode>(in + i, vm, vk));
  return i;
}

template <AffineMode kMode>
__attribute__((target("avx2,fma,f16c"))) size_t U8ToF16Avx2(const uint8_t* in, void* dst, size_t n,
                                                            float mean, float k) {
  uint16_t* out = static_cast<uint16_t*>(dst);
  const __m256 vm = _mm256_set1_ps(mean), vk = _mm256_set1_ps(k);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(NormalizeU8x8<kMode>(in + i, vm, vk),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  return i;
}

// The kernel for (mode, f16), picked once by Create; Convert calls it through a pointer.
SampleConverter::VectorKernel SelectVectorKernel(AffineMode mode, bool f16) {
  switch (mode) {
    case AffineMode::kIdentity:
      return f16 ? U8ToF16Avx2<AffineMode::kIdentity> : U8ToF32Avx2<AffineMode::kIdentity>;
    case AffineMode::kMulInverse:
      return f16 ? U8ToF16Avx2<AffineMode::kMulInverse> : U8ToF32Avx2<AffineMode::kMulInverse>;
    case AffineMode::kDivide:
      return f16 ? U8ToF16Avx2<AffineMode::kDivide> : U8ToF32Avx2<AffineMode::kDivide>;
  }
  return nullptr;
}

// AVX2 and FMA from the level sluice may use (common/cpu_isa.h: the CPU's, capped by
// SLUICE_CPU_ISA); F16C from CPUID leaf 1 directly (clang 14 has no "f16c" for
// __builtin_cpu_supports).
bool CpuHasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}

bool CpuHasVectorKernel(bool f16) {
  return UsableCpuIsa() >= CpuIsa::kAvx2 && (!f16 || CpuHasF16c());
}
#endif
}  // namespace

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: infinity
  if (e <= 0) {                                               // half subnormal or zero
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

SampleConverter::ChannelKernel SampleConverter::MakeChannelKernel(float mean, float std,
                                                                  H2DFormat format) {
  ChannelKernel c;
  c.mean = mean;
  c.std = std;
  c.identity = mean == 0.0f && std == 1.0f;
  c.fast_f32 = true;
  for (int v = 0; v < 256; ++v) {
    c.lut_f32[v] = NormalizeU8(static_cast<uint8_t>(v), mean, std);
    c.lut_f16[v] = FloatToHalf(c.lut_f32[v]);
    // The vectorizable formula must agree with the reference on every input, else the table.
    const float scaled = static_cast<float>(static_cast<double>(v) * kInv255);
    const float fast = c.identity ? scaled : (scaled - mean) / std;
    if (std::memcmp(&fast, &c.lut_f32[v], 4) != 0) c.fast_f32 = false;
  }
#if defined(__x86_64__)
  // The vector kernel, proven on every input: it runs over 0..255 and must give the table's
  // bits for each (else the portable loop or the table stays in use).
  const bool f16 = format == H2DFormat::kF16;
  if (format != H2DFormat::kU8 && CpuHasVectorKernel(f16)) {
    uint8_t all[256];
    for (int v = 0; v < 256; ++v) all[v] = static_cast<uint8_t>(v);
    alignas(32) char out[256 * 4];
    const AffineMode modes[] = {AffineMode::kIdentity, AffineMode::kMulInverse,
                                AffineMode::kDivide};
    for (AffineMode mode : modes) {
      if ((mode == AffineMode::kIdentity) != c.identity) continue;
      const float k = mode == AffineMode::kMulInverse ? 1.0f / std : std;
      const VectorKernel kernel = SelectVectorKernel(mode, f16);
      kernel(all, out, 256, mean, k);
      const bool same = f16 ? std::memcmp(out, c.lut_f16, sizeof(c.lut_f16)) == 0
                            : std::memcmp(out, c.lut_f32, sizeof(c.lut_f32)) == 0;
      if (same) {
        c.vector_kernel = kernel;
        c.kernel_k = k;
        break;
      }
    }
  }
#endif
  return c;
}

absl::StatusOr<SampleConverter> SampleConverter::Create(const RecordSpec& stored, H2DFormat format,
                                                        const Normalization& norm) {
  RETURN_IF_ERROR(CheckNormalization(norm, stored.channels));
  if (format == ElementType::kBF16) {
    return absl::InvalidArgumentError("the batch's h2d format must be u8, f16 or f32, not bf16");
  }
  if (stored.sample_dtype == SampleDType::kF32 && format == H2DFormat::kU8) {
    return absl::InvalidArgumentError("--h2d-format u8 needs u8 samples; this split stores f32");
  }
  SampleConverter c;
  c.source_ = stored.sample_dtype;
  c.out_ = StoredSampleSpec(stored);
  c.out_.layout = SampleLayout::kCHW;
  c.out_.dtype = format;
  c.channels_.reserve(stored.channels);
  for (uint32_t ch = 0; ch < stored.channels; ++ch) {
    c.channels_.push_back(MakeChannelKernel(
        norm.mean_of(ch), norm.std_of(ch),
        stored.sample_dtype == SampleDType::kU8 ? format : H2DFormat::kU8));  // f32: no kernel
  }
  return c;
}

absl::StatusOr<SampleConverter> SampleConverter::Create(SampleDType source, H2DFormat format,
                                                        const Normalization& norm, size_t values) {
  RecordSpec r;
  r.sample_dtype = source;
  r.height = 1;
  r.width = static_cast<uint32_t>(values);
  r.channels = 1;
  return Create(r, format, norm);
}

absl::string_view SampleConverter::kernel_name() const {
  if (source_ != SampleDType::kU8) return "scalar";
  if (out_.dtype == H2DFormat::kU8) return "memcpy";
  const ChannelKernel& k = channels_.front();
  if (k.vector_kernel != nullptr) {
    return out_.dtype == H2DFormat::kF16 ? "avx2+fma+f16c" : "avx2+fma";
  }
  if (out_.dtype == H2DFormat::kF32 && k.fast_f32) return "portable";
  return "table";
}

void SampleConverter::ConvertU8Run(const ChannelKernel& k, const uint8_t* in, void* dst,
                                   size_t n) const {
  if (k.vector_kernel != nullptr) {
    size_t i = k.vector_kernel(in, dst, n, k.mean, k.kernel_k);
    if (out_.dtype == H2DFormat::kF16) {
      for (uint16_t* out = static_cast<uint16_t*>(dst); i < n; ++i) out[i] = k.lut_f16[in[i]];
    } else {
      for (float* out = static_cast<float*>(dst); i < n; ++i) out[i] = k.lut_f32[in[i]];
    }
    return;
  }
  switch (out_.dtype) {
    case H2DFormat::kU8:
      std::memcpy(dst, in, n);
      return;
    case H2DFormat::kF32: {
      float* out = static_cast<float*>(dst);
      if (k.fast_f32 && k.identity) {
        // x/255 correctly rounded: the double product is within 2^-52 of x/255, which is
        // never that close to a float rounding boundary (checked for all x in Create()).
        U8ToF32Scaled(in, out, n);
      } else if (k.fast_f32) {
        U8ToF32Normalized(in, out, n, k.mean, k.std);
      } else {
        for (size_t i = 0; i < n; ++i) out[i] = k.lut_f32[in[i]];
      }
      return;
    }
    case H2DFormat::kF16:
    case H2DFormat::kBF16: {  // bf16 is refused by Create
      uint16_t* out = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = k.lut_f16[in[i]];
      return;
    }
  }
}

// One HWC sample to CHW: each channel's values are gathered from the interleaved input into a
// short contiguous run (on the stack, in L1), which then goes through that channel's kernel.
void SampleConverter::ConvertU8Interleaved(const uint8_t* in, char* out) const {
  constexpr size_t kRun = 256;
  constexpr size_t kRunChannels = 16;  // channels transposed together: a 4 KB stack buffer
  const size_t channels = out_.channels;
  const size_t plane = out_.plane_values();
  const size_t out_size = ElementSize(out_.dtype);
  if (channels > kRunChannels) {  // one channel at a time, reading the sample C times
    alignas(32) uint8_t run[kRun];
    for (size_t c = 0; c < channels; ++c) {
      char* out_plane = out + c * plane * out_size;
      for (size_t p0 = 0; p0 < plane; p0 += kRun) {
        const size_t n = std::min(kRun, plane - p0);
        for (size_t p = 0; p < n; ++p) run[p] = in[(p0 + p) * channels + c];
        ConvertU8Run(channels_[c], run, out_plane + p0 * out_size, n);
      }
    }
    return;
  }
  // Runs of kRun pixels, read once in stored order and split into one run per channel, each
  // then converted by its channel's kernel (u8 output: a copy).
  alignas(32) uint8_t runs[kRunChannels][kRun];
  for (size_t p0 = 0; p0 < plane; p0 += kRun) {
    const size_t n = std::min(kRun, plane - p0);
    const uint8_t* pixel = in + p0 * channels;
    if (channels == 3) {
      for (size_t p = 0; p < n; ++p, pixel += 3) {
        runs[0][p] = pixel[0];
        runs[1][p] = pixel[1];
        runs[2][p] = pixel[2];
      }
    } else {
      for (size_t p = 0; p < n; ++p, pixel += channels) {
        for (size_t c = 0; c < channels; ++c) runs[c][p] = pixel[c];
      }
    }
    for (size_t c = 0; c < channels; ++c) {
      char* dst = out + (c * plane + p0) * out_size;
      if (out_.dtype == H2DFormat::kU8) {
        std::memcpy(dst, runs[c], n);
      } else {
        ConvertU8Run(channels_[c], runs[c], dst, n);
      }
    }
  }
}

// f32 samples (little-endian on every platform we build for); memcpy avoids misaligned loads.
void SampleConverter::ConvertF32(const char* src, void* dst, size_t count) const {
  const size_t channels = out_.channels;
  const size_t plane = out_.plane_values();
  const size_t values = out_.values();
  for (size_t s = 0; s < count; ++s) {
    for (size_t p = 0; p < plane; ++p) {
      for (size_t c = 0; c < channels; ++c) {
        float x;
        std::memcpy(&x, src + (s * values + p * channels + c) * 4, 4);
        const float y = (x - channels_[c].mean) / channels_[c].std;
        const size_t o = s * values + c * plane + p;  // CHW
        if (out_.dtype == H2DFormat::kF32) {
          static_cast<float*>(dst)[o] = y;
        } else {
          static_cast<uint16_t*>(dst)[o] = FloatToHalf(y);
        }
      }
    }
  }
}

void SampleConverter::Convert(const char* src, void* dst, size_t count) const {
  if (source_ != SampleDType::kU8) return ConvertF32(src, dst, count);
  const uint8_t* in = reinterpret_cast<const uint8_t*>(src);
  if (out_.channels == 1) {  // HWC is CHW: the whole run in one call
    ConvertU8Run(channels_.front(), in, dst, out_.values() * count);
    return;
  }
  for (size_t s = 0; s < count; ++s) {
    ConvertU8Interleaved(in + s * out_.values(), static_cast<char*>(dst) + s * out_.bytes());
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
