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

// f32 -> bf16 as FloatToBFloat16, 16 values per iteration: integer arithmetic, so the same bits
// by construction (tested against FloatToBFloat16 on spread bit patterns). Converts the first
// n - n % 16 values and returns how many.
__attribute__((target("avx2"))) inline __m256i RoundToBf16(__m256i x) {
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i r =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
}

__attribute__((target("avx2"))) size_t F32ToBf16Avx2(const char* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = RoundToBf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i)));
    const __m256i b =
        RoundToBf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * i + 32)));
    // packus works per 128-bit lane (a0-3 b0-3 a4-7 b4-7): the permute restores the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  return i;
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

void F32ToBf16(const void* src, uint16_t* out, size_t n) {
  const char* in = static_cast<const char*>(src);
  size_t i = 0;
#if defined(__x86_64__)
  if (UsableCpuIsa() >= CpuIsa::kAvx2) i = F32ToBf16Avx2(in, out, n);
#endif
  for (; i < n; ++i) {
    float f;
    std::memcpy(&f, in + 4 * i, 4);  // stored f32 samples may sit at any address
    out[i] = FloatToBFloat16(f);
  }
}

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
    c.lut_bf16[v] = FloatToBFloat16(c.lut_f32[v]);
    // The vectorizable formula must agree with the reference on every input, else the table.
    const float scaled = static_cast<float>(static_cast<double>(v) * kInv255);
    const float fast = c.identity ? scaled : (scaled - mean) / std;
    if (std::memcmp(&fast, &c.lut_f32[v], 4) != 0) c.fast_f32 = false;
  }
#if defined(__x86_64__)
  // The vector kernel, proven on every input: it runs over 0..255 and must give the table's
  // bits for each (else the portable loop or the table stays in use). bf16: the f32 kernel,
  // whose output F32ToBf16 then rounds (the same bits as the bf16 table).
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
                                                        const Normalization& norm,
                                                        SampleLayout layout) {
  RETURN_IF_ERROR(CheckNormalization(norm, stored.channels));
  if (stored.sample_dtype == SampleDType::kF32 && format == H2DFormat::kU8) {
    return absl::InvalidArgumentError("--h2d-format u8 needs u8 samples; this split stores f32");
  }
  SampleConverter c;
  c.source_ = stored.sample_dtype;
  c.out_ = StoredSampleSpec(stored);
  c.out_.layout = layout;
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
    return out_.dtype == H2DFormat::kF16    ? "avx2+fma+f16c"
           : out_.dtype == H2DFormat::kBF16 ? "avx2+fma+bf16"
                                            : "avx2+fma";
  }
  if (out_.dtype == H2DFormat::kF32 && k.fast_f32) return "portable";
  return "table";
}

void SampleConverter::ConvertU8RunF32(const ChannelKernel& k, const uint8_t* in, float* out,
                                      size_t n) {
  if (k.vector_kernel != nullptr) {  // f32's kernel (the batch is f32 or bf16)
    size_t i = k.vector_kernel(in, out, n, k.mean, k.kernel_k);
    for (; i < n; ++i) out[i] = k.lut_f32[in[i]];
  } else if (k.fast_f32 && k.identity) {
    // x/255 correctly rounded: the double product is within 2^-52 of x/255, which is never that
    // close to a float rounding boundary (checked for all x in Create()).
    U8ToF32Scaled(in, out, n);
  } else if (k.fast_f32) {
    U8ToF32Normalized(in, out, n, k.mean, k.std);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = k.lut_f32[in[i]];
  }
}

void SampleConverter::ConvertU8Run(const ChannelKernel& k, const uint8_t* in, void* dst,
                                   size_t n) const {
  switch (out_.dtype) {
    case H2DFormat::kU8:
      std::memcpy(dst, in, n);
      return;
    case H2DFormat::kF32:
      ConvertU8RunF32(k, in, static_cast<float*>(dst), n);
      return;
    case H2DFormat::kF16: {
      uint16_t* out = static_cast<uint16_t*>(dst);
      size_t i = k.vector_kernel != nullptr ? k.vector_kernel(in, dst, n, k.mean, k.kernel_k) : 0;
      for (; i < n; ++i) out[i] = k.lut_f16[in[i]];
      return;
    }
    case H2DFormat::kBF16: {
      uint16_t* out = static_cast<uint16_t*>(dst);
      if (k.vector_kernel == nullptr) {
        for (size_t i = 0; i < n; ++i) out[i] = k.lut_bf16[in[i]];
        return;
      }
      // f32's kernel into an L1 run, then rounded: FloatToBFloat16(lut_f32[x]) is lut_bf16[x].
      alignas(32) float run[kConvertRun];
      for (size_t i = 0; i < n; i += kConvertRun) {
        const size_t m = std::min(kConvertRun, n - i);
        ConvertU8RunF32(k, in + i, run, m);
        F32ToBf16(run, out + i, m);
      }
      return;
    }
  }
}

namespace {
// n values of elem_size bytes, contiguous at `run`, to every `stride`-th value at `out`.
template <typename T>
void ScatterTyped(const char* run, char* out, size_t n, size_t stride) {
  const T* in = reinterpret_cast<const T*>(run);
  for (size_t i = 0; i < n; ++i) std::memcpy(out + i * stride * sizeof(T), &in[i], sizeof(T));
}
void ScatterRun(const char* run, char* out, size_t n, size_t stride, size_t elem_size) {
  switch (elem_size) {
    case 1:
      return ScatterTyped<uint8_t>(run, out, n, stride);
    case 2:
      return ScatterTyped<uint16_t>(run, out, n, stride);
    default:
      return ScatterTyped<float>(run, out, n, stride);
  }
}
}  // namespace

namespace {
#if defined(__x86_64__)
// Pixels 8k..8k+7 of three planes (one 32-bit value each) to their 24 interleaved values: output
// vector k, lane j holds pixel (8k + j) / 3, channel (8k + j) % 3, taken from its plane by a
// permute and two blends. Moves bits only.
struct Interleaved3 {
  __m256i v0, v1, v2;
};
__attribute__((target("avx2"))) inline __m256i Pick(__m256i v, int i0, int i1, int i2, int i3,
                                                    int i4, int i5, int i6, int i7) {
  return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(i0, i1, i2, i3, i4, i5, i6, i7));
}
__attribute__((target("avx2"))) inline Interleaved3 InterleaveVectors3(__m256i r, __m256i g,
                                                                       __m256i b) {
  // Each source's indices give the pixel (within the 8) for the lanes it fills; a blend bit set
  // takes the lane from its second operand.
  Interleaved3 o;
  // Vector 0: r g b r g b r g (g in lanes 1 4 7: 0x92; b in 2 5: 0x24).
  o.v0 = _mm256_blend_epi32(
      _mm256_blend_epi32(Pick(r, 0, 0, 0, 1, 0, 0, 2, 0), Pick(g, 0, 0, 0, 0, 1, 0, 0, 2), 0x92),
      Pick(b, 0, 0, 0, 0, 0, 1, 0, 0), 0x24);
  // Vector 1: b r g b r g b r (g in 2 5: 0x24; b in 0 3 6: 0x49).
  o.v1 = _mm256_blend_epi32(
      _mm256_blend_epi32(Pick(r, 0, 3, 0, 0, 4, 0, 0, 5), Pick(g, 0, 0, 3, 0, 0, 4, 0, 0), 0x24),
      Pick(b, 2, 0, 0, 3, 0, 0, 4, 0), 0x49);
  // Vector 2: g b r g b r g b (g in 0 3 6: 0x49; b in 1 4 7: 0x92).
  o.v2 = _mm256_blend_epi32(
      _mm256_blend_epi32(Pick(r, 0, 0, 6, 0, 0, 7, 0, 0), Pick(g, 5, 0, 0, 6, 0, 0, 7, 0), 0x49),
      Pick(b, 0, 5, 0, 0, 6, 0, 0, 7), 0x92);
  return o;
}

// Three planes of 32-bit values to interleaved pixels, 8 pixels per iteration; returns the
// pixels done (a multiple of 8), the caller does the rest.
__attribute__((target("avx2"))) size_t Interleave3U32Avx2(const char* r, const char* g,
                                                          const char* b, char* o, size_t n) {
  size_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const Interleaved3 v =
        InterleaveVectors3(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 4 * p)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 4 * p)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 4 * p)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 12 * p), v.v0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 12 * p + 32), v.v1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 12 * p + 64), v.v2);
  }
  return p;
}

// The same for 16-bit values (f16, bf16): widened to 32 bits, interleaved, packed back (the
// values are below 2^16, so the saturating pack keeps them).
__attribute__((target("avx2"))) size_t Interleave3U16Avx2(const char* r, const char* g,
                                                          const char* b, char* o, size_t n) {
  size_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const Interleaved3 v = InterleaveVectors3(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 2 * p))),
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 2 * p))),
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * p))));
    // packus works per 128-bit lane (v0 0-3, v1 0-3, v0 4-7, v1 4-7): the permute restores it.
    const __m256i first = _mm256_permute4x64_epi64(_mm256_packus_epi32(v.v0, v.v1), 0xd8);
    const __m256i last = _mm256_permute4x64_epi64(_mm256_packus_epi32(v.v2, v.v2), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 6 * p), first);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 6 * p + 32), _mm256_castsi256_si128(last));
  }
  return p;
}

#endif

// Three planes to interleaved pixels in one sequential pass (RGB: the common case).
template <typename T>
void Interleave3(const char* in, char* out, size_t plane) {
  const T* r = reinterpret_cast<const T*>(in);
  const T* g = r + plane;
  const T* b = g + plane;
  T* o = reinterpret_cast<T*>(out);
  size_t p = 0;
#if defined(__x86_64__)
  if (sizeof(T) > 1 && UsableCpuIsa() >= CpuIsa::kAvx2) {
    const char* rb = reinterpret_cast<const char*>(r);
    const char* gb = reinterpret_cast<const char*>(g);
    const char* bb = reinterpret_cast<const char*>(b);
    p = sizeof(T) == 4 ? Interleave3U32Avx2(rb, gb, bb, out, plane)
                       : Interleave3U16Avx2(rb, gb, bb, out, plane);
  }
#endif
  for (; p < plane; ++p) {
    o[3 * p] = r[p];
    o[3 * p + 1] = g[p];
    o[3 * p + 2] = b[p];
  }
}
}  // namespace

void ChwToHwc(const char* in, char* out, size_t channels, size_t plane, size_t elem_size) {
  if (channels == 1) {
    std::memcpy(out, in, plane * elem_size);
    return;
  }
  if (channels == 3) {
    switch (elem_size) {
      case 1:
        return Interleave3<uint8_t>(in, out, plane);
      case 2:
        return Interleave3<uint16_t>(in, out, plane);
      default:
        return Interleave3<float>(in, out, plane);
    }
  }
  for (size_t c = 0; c < channels; ++c) {
    ScatterRun(in + c * plane * elem_size, out + c * elem_size, plane, channels, elem_size);
  }
}

// One HWC sample to CHW (or HWC): each channel's values are gathered from the interleaved input
// into a short contiguous run (on the stack, in L1), which then goes through that channel's
// kernel: into its output plane (CHW), or into a converted run scattered back to every C-th
// value (HWC).
// Three channels to f32 or bf16 HWC: per run of pixels, each channel's values gathered and
// converted to f32 (its proven kernel), the three runs interleaved (Interleave3, vector where
// the CPU has AVX2), and for bf16 rounded as one run: the same bits as the general path.
void SampleConverter::ConvertU8ToHwc3(const uint8_t* in, char* out) const {
  const size_t plane = out_.plane_values();
  const size_t out_size = ElementSize(out_.dtype);
  alignas(32) uint8_t runs[3][kConvertRun];
  for (size_t p0 = 0; p0 < plane; p0 += kConvertRun) {
    const size_t n = std::min(kConvertRun, plane - p0);
    const uint8_t* pixel = in + p0 * 3;
    for (size_t p = 0; p < n; ++p, pixel += 3) {
      runs[0][p] = pixel[0];
      runs[1][p] = pixel[1];
      runs[2][p] = pixel[2];
    }
    Hwc3FromRuns(runs[0], runs[1], runs[2], n, out + p0 * 3 * out_size);
  }
}

void SampleConverter::Hwc3FromRuns(const uint8_t* r, const uint8_t* g, const uint8_t* b, size_t n,
                                   char* out) const {
  alignas(32) float planes[3 * kConvertRun];  // the runs' f32 values, one after another
  alignas(32) float pixels[3 * kConvertRun];  // interleaved (bf16 only)
  const uint8_t* runs[3] = {r, g, b};
  for (size_t c = 0; c < 3; ++c) ConvertU8RunF32(channels_[c], runs[c], planes + c * n, n);
  if (out_.dtype == H2DFormat::kF32) {
    ChwToHwc(reinterpret_cast<const char*>(planes), out, 3, n, 4);
  } else {
    ChwToHwc(reinterpret_cast<const char*>(planes), reinterpret_cast<char*>(pixels), 3, n, 4);
    F32ToBf16(pixels, reinterpret_cast<uint16_t*>(out), 3 * n);
  }
}

void SampleConverter::ConvertPlanar(const char* src, void* dst) const {
  const uint8_t* in = reinterpret_cast<const uint8_t*>(src);
  char* out = static_cast<char*>(dst);
  const size_t channels = out_.channels;
  const size_t plane = out_.plane_values();
  const size_t out_size = ElementSize(out_.dtype);
  if (out_.layout == SampleLayout::kCHW || channels == 1) {
    for (size_t c = 0; c < channels; ++c) {
      ConvertU8Run(channels_[c], in + c * plane, out + c * plane * out_size, plane);
    }
    return;
  }
  if (channels == 3 && (out_.dtype == H2DFormat::kF32 || out_.dtype == H2DFormat::kBF16)) {
    for (size_t p0 = 0; p0 < plane; p0 += kConvertRun) {
      Hwc3FromRuns(in + p0, in + plane + p0, in + 2 * plane + p0, std::min(kConvertRun, plane - p0),
                   out + p0 * 3 * out_size);
    }
    return;
  }
  alignas(32) char converted[kConvertRun * 4];  // one channel's converted run
  for (size_t c = 0; c < channels; ++c) {
    for (size_t p0 = 0; p0 < plane; p0 += kConvertRun) {
      const size_t n = std::min(kConvertRun, plane - p0);
      ConvertU8Run(channels_[c], in + c * plane + p0, converted, n);
      ScatterRun(converted, out + (p0 * channels + c) * out_size, n, channels, out_size);
    }
  }
}

void SampleConverter::ConvertU8Interleaved(const uint8_t* in, char* out) const {
  constexpr size_t kRun = 256;
  constexpr size_t kRunChannels = 16;  // channels transposed together: a 4 KB stack buffer
  const size_t channels = out_.channels;
  const size_t plane = out_.plane_values();
  const size_t out_size = ElementSize(out_.dtype);
  const bool hwc = out_.layout == SampleLayout::kHWC;
  alignas(32) char converted[kRun * 4];  // HWC: one channel's converted run
  if (hwc && channels == 3 && out_.dtype != H2DFormat::kF16 && out_.dtype != H2DFormat::kU8) {
    return ConvertU8ToHwc3(in, out);
  }
  // Channel c's n converted values of pixels p0.. to their place in the output.
  auto emit = [&](size_t c, size_t p0, const uint8_t* run, size_t n) {
    if (!hwc) {
      char* dst = out + (c * plane + p0) * out_size;
      if (out_.dtype == H2DFormat::kU8) {
        std::memcpy(dst, run, n);
      } else {
        ConvertU8Run(channels_[c], run, dst, n);
      }
      return;
    }
    ConvertU8Run(channels_[c], run, converted, n);
    ScatterRun(converted, out + (p0 * channels + c) * out_size, n, channels, out_size);
  };
  if (channels > kRunChannels) {  // one channel at a time, reading the sample C times
    alignas(32) uint8_t run[kRun];
    for (size_t c = 0; c < channels; ++c) {
      for (size_t p0 = 0; p0 < plane; p0 += kRun) {
        const size_t n = std::min(kRun, plane - p0);
        for (size_t p = 0; p < n; ++p) run[p] = in[(p0 + p) * channels + c];
        emit(c, p0, run, n);
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
    for (size_t c = 0; c < channels; ++c) emit(c, p0, runs[c], n);
  }
}

// f32 samples (little-endian on every platform we build for); memcpy avoids misaligned loads.
void SampleConverter::ConvertF32(const char* src, void* dst, size_t count) const {
  if (out_.channels == 1 && channels_.front().identity && out_.dtype != H2DFormat::kF16) {
    // A chain's float32 output to the batch's dtype (ChainPreprocessor): a copy or a rounding.
    const size_t n = out_.values() * count;
    if (out_.dtype == H2DFormat::kF32) {
      std::memcpy(dst, src, n * 4);
    } else {
      F32ToBf16(src, static_cast<uint16_t*>(dst), n);
    }
    return;
  }
  const size_t channels = out_.channels;
  const size_t plane = out_.plane_values();
  const size_t values = out_.values();
  const bool hwc = out_.layout == SampleLayout::kHWC;
  for (size_t s = 0; s < count; ++s) {
    for (size_t p = 0; p < plane; ++p) {
      for (size_t c = 0; c < channels; ++c) {
        float x;
        std::memcpy(&x, src + (s * values + p * channels + c) * 4, 4);
        const float y = (x - channels_[c].mean) / channels_[c].std;
        const size_t o = s * values + (hwc ? p * channels + c : c * plane + p);
        if (out_.dtype == H2DFormat::kF32) {
          static_cast<float*>(dst)[o] = y;
        } else {
          static_cast<uint16_t*>(dst)[o] =
              out_.dtype == H2DFormat::kF16 ? FloatToHalf(y) : FloatToBFloat16(y);
        }
      }
    }
  }
}

void SampleConverter::Convert(const char* src, void* dst, size_t count) const {
  if (source_ != SampleDType::kU8) return ConvertF32(src, dst, count);
  const uint8_t* in = reinterpret_cast<const uint8_t*>(src);
  // One channel: HWC is CHW; u8 kept HWC: a copy. The whole run in one call.
  if (out_.channels == 1 || (out_.dtype == H2DFormat::kU8 && out_.layout == SampleLayout::kHWC)) {
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
