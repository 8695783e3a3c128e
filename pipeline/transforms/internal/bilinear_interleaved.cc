#include "pipeline/transforms/internal/bilinear_interleaved.h"

#include <algorithm>
#include <cstring>

#include "common/cpu_isa.h"
#include "pipeline/transforms/internal/bilinear.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace sluice::transforms_internal {
namespace {

// Output columns go in tiles, so that their taps and two interpolated rows fit on the stack for
// any output width. Rows hold 4 floats per pixel (R, G, B and a lane that is ignored), the
// layout the AVX2 kernel computes them in.
constexpr uint32_t kTile = 256;

// Rounds half to even like nearbyint for v in [0, 2^23), as bilinear.cc's u8 store does.
inline uint8_t RoundToU8(float v) { return static_cast<uint8_t>((v + 0x1.0p23f) - 0x1.0p23f); }

// The taps of one tile of output columns: the byte offsets in a source row of each column's
// two source pixels, and their weights. With `mirror` column j of the tile shows output column
// out_w - 1 - (x0 + j) of the unmirrored resize.
struct ColumnTaps {
  uint32_t count = 0;
  uint32_t offset0[kTile];
  uint32_t offset1[kTile];
  float l0[kTile];
  float l1[kTile];
};

void BuildColumnTaps(uint32_t x0, uint32_t count, uint32_t out_w, bool mirror, float scale_x,
                     uint32_t win_w, int64_t left, uint32_t pixel_bytes, ColumnTaps& taps) {
  taps.count = count;
  for (uint32_t j = 0; j < count; ++j) {
    const uint32_t x = mirror ? out_w - 1 - (x0 + j) : x0 + j;
    const BilinearTap t = BilinearTapOf(x, scale_x, win_w);
    taps.offset0[j] = static_cast<uint32_t>((left + t.i0) * pixel_bytes);
    taps.offset1[j] = static_cast<uint32_t>((left + t.i1) * pixel_bytes);
    taps.l0[j] = t.l0;
    taps.l1[j] = t.l1;
  }
}

// Row r of the window interpolated along x into `row` (4 floats per pixel, the first
// `channels` set), as bilinear.cc computes it: l0x * v0 + l1x * v1.
void InterpolateRowPortable(const uint8_t* source, const ColumnTaps& taps, uint32_t channels,
                            float* row) {
  for (uint32_t j = 0; j < taps.count; ++j) {
    const uint8_t* p0 = source + taps.offset0[j];
    const uint8_t* p1 = source + taps.offset1[j];
    for (uint32_t c = 0; c < channels; ++c) {
      row[4 * j + c] =
          taps.l0[j] * static_cast<float>(p0[c]) + taps.l1[j] * static_cast<float>(p1[c]);
    }
  }
}

// Two interpolated rows blended along y, rounded, into `channels` planes at columns
// [x0, x0 + count) of output row y.
void BlendRowsPortable(const float* top, const float* bottom, float l0, float l1, uint32_t channels,
                       uint32_t count, uint8_t* out, size_t plane) {
  for (uint32_t c = 0; c < channels; ++c) {
    uint8_t* o = out + c * plane;
    for (uint32_t j = 0; j < count; ++j)
      o[j] = RoundToU8(l0 * top[4 * j + c] + l1 * bottom[4 * j + c]);
  }
}

// The resize of one tile of columns, with the row cache of bilinear.cc: source row r is
// interpolated into slot r % 2 once, and consecutive source rows differ in parity. `Kernel`
// provides InterpolateRow and BlendRows.
// With `region`, only the part [out_top, out_top + out_h) x [out_left, out_left + out_w) of a
// resize to full_out_h x full_out_w is written (ResizeInterleavedU8Region); top and left may
// then be negative (the image holds only the rows and columns that part reads).
struct OutputRegion {
  uint32_t full_out_h, full_out_w, out_top, out_left, out_h, out_w;
};

template <typename Kernel>
void ResizeTiles(const InterleavedU8Image& image, uint32_t channels, int64_t top, int64_t left,
                 uint32_t win_h, uint32_t win_w, const OutputRegion& region, bool mirror,
                 uint8_t* dst) {
  const float scale_y = static_cast<float>(win_h) / static_cast<float>(region.full_out_h);
  const float scale_x = static_cast<float>(win_w) / static_cast<float>(region.full_out_w);
  const size_t plane = size_t{region.out_h} * region.out_w;
  ColumnTaps taps;
  alignas(32) float rows[2][4 * kTile];
  for (uint32_t x0 = 0; x0 < region.out_w; x0 += kTile) {
    const uint32_t count = std::min(region.out_w - x0, kTile);
    BuildColumnTaps(region.out_left + x0, count, region.full_out_w, mirror, scale_x, win_w, left,
                    image.pixel_bytes, taps);
    Kernel kernel(taps);
    int64_t row_in_slot[2] = {-1, -1};
    auto row = [&](int64_t r) -> const float* {  // r: a row of the window
      float* slot = rows[r & 1];
      if (row_in_slot[r & 1] != r) {
        kernel.InterpolateRow(image.pixels + static_cast<size_t>(top + r) * image.row_bytes,
                              channels, slot);
        row_in_slot[r & 1] = r;
      }
      return slot;
    };
    for (uint32_t y = 0; y < region.out_h; ++y) {
      const BilinearTap ty = BilinearTapOf(region.out_top + y, scale_y, win_h);
      const float* top_row = row(ty.i0);
      const float* bottom_row = row(ty.i1);
      kernel.BlendRows(top_row, bottom_row, ty.l0, ty.l1, channels,
                       dst + size_t{y} * region.out_w + x0, plane);
    }
  }
}

struct PortableKernel {
  explicit PortableKernel(const ColumnTaps& t) : taps(t) {}
  void InterpolateRow(const uint8_t* source, uint32_t channels, float* row) const {
    InterpolateRowPortable(source, taps, channels, row);
  }
  void BlendRows(const float* top, const float* bottom, float l0, float l1, uint32_t channels,
                 uint8_t* out, size_t plane) const {
    BlendRowsPortable(top, bottom, l0, l1, channels, taps.count, out, plane);
  }
  const ColumnTaps& taps;
};

#if defined(__x86_64__)
#define SLUICE_INTERLEAVED_AVX2 1
// AVX2 without FMA: a product and a sum round separately, as in the portable code.
#define SLUICE_AVX2 __attribute__((target("avx2")))

// RGB (kPixelBytes 3) or RGBA (4). Two ways to interpolate a row along x, both with lanes 0-2
// of a pixel's four floats equal to l0 * v0 + l1 * v1:
// - Where a tile's source columns span at most kMaxSpan pixels (any downscale up to 4x), the
//   span's bytes are first widened to floats (8 at a time), then each pixel of the tile is two
//   unaligned 4-float loads (its two source pixels, with one more value that is ignored), two
//   products and a sum, two pixels per 256-bit register.
// - Else one 8-byte load holds a column's two neighbouring source pixels; widened to 8 floats
//   and multiplied by (l0, l0, l0, l1, l1, l1, 0, 0) (RGBA: (l0, l0, l0, 0, l1, l1, l1, 0)),
//   the second pixel's products are moved onto the first's lanes and added. A column whose two
//   taps are one pixel (the last source column) is computed as the portable code does.
template <uint32_t kPixelBytes>
struct Avx2Kernel {
  static constexpr uint32_t kMaxSpan = 4 * kTile + 2;

  SLUICE_AVX2 explicit Avx2Kernel(const ColumnTaps& t) : taps(t) {
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t j = 0; j < taps.count; ++j) {
      lo = std::min({lo, taps.offset0[j], taps.offset1[j]});
      hi = std::max({hi, taps.offset0[j], taps.offset1[j]});
    }
    span_start = lo;
    span_bytes = hi + kPixelBytes - lo;
    float_row = span_bytes <= kMaxSpan * kPixelBytes;
    for (uint32_t j = 0; j < taps.count; ++j) {
      for (int k = 0; k < 8; ++k) weights[j][k] = 0;
      for (int c = 0; c < 3; ++c) {
        weights[j][c] = taps.l0[j];
        weights[j][kPixelBytes + c] = taps.l1[j];
      }
      for (int k = 0; k < 4; ++k) {
        w0[4 * j + k] = taps.l0[j];
        w1[4 * j + k] = taps.l1[j];
      }
      f0[j] = taps.offset0[j] - lo;
      f1[j] = taps.offset1[j] - lo;
      pair[j] = taps.offset1[j] == taps.offset0[j] + kPixelBytes;
    }
  }

  SLUICE_AVX2 void InterpolateRow(const uint8_t* source, uint32_t, float* row) {
    if (float_row) {
      InterpolateFromFloats(source, row);
    } else {
      InterpolatePairs(source, row);
    }
  }

  SLUICE_AVX2 void InterpolateFromFloats(const uint8_t* source, float* row) {
    const uint8_t* s = source + span_start;
    const uint32_t span = span_bytes;
    uint32_t k = 0;
    for (; k + 16 <= span; k += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k));
      _mm256_store_ps(values + k, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
      _mm256_store_ps(values + k + 8,
                      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(bytes, bytes))));
    }
    for (; k < span; k += 8) {
      const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + k));
      _mm256_store_ps(values + k, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
    }
    // The last pixel's 4-float load reads one value past the span: a defined one.
    _mm256_store_ps(values + k, _mm256_setzero_ps());
    // Locals, so that the stores to `row` do not make the compiler reload them.
    const float* v = values;
    const uint32_t* o0 = f0;
    const uint32_t* o1 = f1;
    const uint32_t count = taps.count;
    uint32_t j = 0;
    for (; j + 2 <= count; j += 2) {
      const __m256 a = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(v + o0[j])),
                                            _mm_loadu_ps(v + o0[j + 1]), 1);
      const __m256 b = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(v + o1[j])),
                                            _mm_loadu_ps(v + o1[j + 1]), 1);
      _mm256_store_ps(row + 4 * j, _mm256_add_ps(_mm256_mul_ps(a, _mm256_load_ps(w0 + 4 * j)),
                                                 _mm256_mul_ps(b, _mm256_load_ps(w1 + 4 * j))));
    }
    if (j < count) {
      const __m128 a = _mm_loadu_ps(v + o0[j]), b = _mm_loadu_ps(v + o1[j]);
      _mm_store_ps(row + 4 * j, _mm_add_ps(_mm_mul_ps(a, _mm_load_ps(w0 + 4 * j)),
                                           _mm_mul_ps(b, _mm_load_ps(w1 + 4 * j))));
    }
  }

  SLUICE_AVX2 void InterpolatePairs(const uint8_t* source, float* row) const {
    const __m256i second = kPixelBytes == 3 ? _mm256_setr_epi32(3, 4, 5, 6, 7, 7, 7, 7)
                                            : _mm256_setr_epi32(4, 5, 6, 7, 7, 7, 7, 7);
    for (uint32_t j = 0; j < taps.count; ++j) {
      if (pair[j]) {
        const __m128i bytes =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(source + taps.offset0[j]));
        const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        const __m256 p = _mm256_mul_ps(v, _mm256_load_ps(weights[j]));
        const __m256 sum = _mm256_add_ps(p, _mm256_permutevar8x32_ps(p, second));
        _mm_store_ps(row + 4 * j, _mm256_castps256_ps128(sum));
      } else {
        const uint8_t* p0 = source + taps.offset0[j];
        const uint8_t* p1 = source + taps.offset1[j];
        for (uint32_t c = 0; c < 3; ++c) {
          row[4 * j + c] =
              taps.l0[j] * static_cast<float>(p0[c]) + taps.l1[j] * static_cast<float>(p1[c]);
        }
        row[4 * j + 3] = 0;
      }
    }
  }

  // Eight pixels (four registers of two RGBx pixels) at a time: blended, rounded to integers,
  // packed to bytes and regrouped into eight R, eight G and eight B.
  SLUICE_AVX2 void BlendRows(const float* top, const float* bottom, float l0, float l1, uint32_t,
                             uint8_t* out, size_t plane) const {
    const __m256 y0 = _mm256_set1_ps(l0), y1 = _mm256_set1_ps(l1);
    // Within each 128-bit lane after the packs: 4 pixels' RGBx bytes to R x4, G x4, B x4, x4.
    const __m256i by_channel =
        _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9,
                         13, 2, 6, 10, 14, 3, 7, 11, 15);
    uint8_t* r = out;
    uint8_t* g = out + plane;
    uint8_t* b = out + 2 * plane;
    uint32_t j = 0;
    for (; j + 8 <= taps.count; j += 8) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_add_ps(_mm256_mul_ps(y0, _mm256_load_ps(top + 4 * j + 8 * k)),
                                       _mm256_mul_ps(y1, _mm256_load_ps(bottom + 4 * j + 8 * k)));
        q[k] =
            _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
      // Lane 0 ends up with pixels 0, 2, 4, 6 and lane 1 with 1, 3, 5, 7.
      const __m256i bytes =
          _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
      const __m256i grouped = _mm256_shuffle_epi8(bytes, by_channel);
      const __m128i even = _mm256_castsi256_si128(grouped);
      const __m128i odd = _mm256_extracti128_si256(grouped, 1);
      const __m128i rg = _mm_unpacklo_epi8(even, odd);  // R0..R7, G0..G7
      const __m128i bx = _mm_unpackhi_epi8(even, odd);  // B0..B7, x
      _mm_storel_epi64(reinterpret_cast<__m128i*>(r + j), rg);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(g + j), _mm_unpackhi_epi64(rg, rg));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(b + j), bx);
    }
    for (; j < taps.count; ++j) {
      for (uint32_t c = 0; c < 3; ++c) {
        out[c * plane + j] = RoundToU8(l0 * top[4 * j + c] + l1 * bottom[4 * j + c]);
      }
    }
  }

  const ColumnTaps& taps;
  bool float_row = false;
  uint32_t span_start = 0;  // bytes into a source row
  uint32_t span_bytes = 0;
  uint32_t f0[kTile];  // offsets into `values` (bytes of the span)
  uint32_t f1[kTile];
  alignas(32) float w0[4 * kTile];  // l0 four times per pixel
  alignas(32) float w1[4 * kTile];
  alignas(32) float values[kMaxSpan * kPixelBytes + 16];  // the span widened (+ 8 per load)
  alignas(32) float weights[kTile][8];
  bool pair[kTile];
};

// The level sluice may use (common/cpu_isa.h: SLUICE_CPU_ISA=baseline forces the portable
// kernel; both give the same bits).
bool CpuHasAvx2() { return UsableCpuIsa() >= CpuIsa::kAvx2; }
#endif
}  // namespace

namespace {
void ResizeAny(const InterleavedU8Image& image, uint32_t channels, int64_t top, int64_t left,
               uint32_t win_h, uint32_t win_w, const OutputRegion& region, bool mirror,
               uint8_t* dst, InterleavedKernel kernel) {
  const bool grey = image.pixel_bytes == 1;
#if defined(SLUICE_INTERLEAVED_AVX2)
  static const bool avx2 = CpuHasAvx2();
  if (kernel == InterleavedKernel::kAuto && avx2 && !grey) {
    if (image.pixel_bytes == 3) {
      return ResizeTiles<Avx2Kernel<3>>(image, 3, top, left, win_h, win_w, region, mirror, dst);
    }
    return ResizeTiles<Avx2Kernel<4>>(image, 3, top, left, win_h, win_w, region, mirror, dst);
  }
#endif
  ResizeTiles<PortableKernel>(image, grey ? 1 : 3, top, left, win_h, win_w, region, mirror, dst);
  if (grey) {
    const size_t plane = size_t{region.out_h} * region.out_w;
    for (uint32_t c = 1; c < channels; ++c) std::memcpy(dst + c * plane, dst, plane);
  }
}
}  // namespace

void ResizeInterleavedU8(const InterleavedU8Image& image, uint32_t channels, uint32_t top,
                         uint32_t left, uint32_t win_h, uint32_t win_w, uint32_t out_h,
                         uint32_t out_w, bool mirror, uint8_t* dst, InterleavedKernel kernel) {
  ResizeAny(image, channels, top, left, win_h, win_w,
            OutputRegion{out_h, out_w, 0, 0, out_h, out_w}, mirror, dst, kernel);
}

void ResizeInterleavedU8Region(const InterleavedU8Image& image, uint32_t channels, int64_t top,
                               int64_t left, uint32_t win_h, uint32_t win_w, uint32_t full_out_h,
                               uint32_t full_out_w, uint32_t out_top, uint32_t out_left,
                               uint32_t out_h, uint32_t out_w, uint8_t* dst,
                               InterleavedKernel kernel) {
  ResizeAny(image, channels, top, left, win_h, win_w,
            OutputRegion{full_out_h, full_out_w, out_top, out_left, out_h, out_w}, false, dst,
            kernel);
}

}  // namespace sluice::transforms_internal
