#include "pipeline/transforms/internal/gaussian_blur_kernel.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace sluice::transforms_internal {
namespace {

size_t Aligned64(size_t n) { return (n + 63) & ~size_t{63}; }

// torch's 'reflect' padding: index i of a side of n mirrored without repeating the edge
// (-1 -> 1, n -> n - 2); |i| < n, i < 2n - 1.
inline size_t Reflect(int64_t i, uint32_t n) {
  if (i < 0) i = -i;
  if (i >= int64_t{n}) i = 2 * (int64_t{n} - 1) - i;
  return static_cast<size_t>(i);
}

// torch.round (half to even) then the cast to uint8, for v in [0, 255] after clamping: adding
// and taking away 2^23 rounds a float in [0, 2^23) to an integer in the default rounding mode
// (std::nearbyint's result), and vectorizes without SSE4.1.
inline uint8_t RoundToU8(float v) {
  v = v < 0.0f ? 0.0f : v;
  v = v > 255.0f ? 255.0f : v;
  return static_cast<uint8_t>((v + 0x1p23f) - 0x1p23f);
}

// One channel along the rows: each row, widened to float32 and padded by kx / 2 on each side,
// convolved with wx into `tmp` (h x w floats). `padded` holds w + 2 (kx / 2) floats.
template <typename T>
void RowPass(const T* __restrict__ src, uint32_t h, uint32_t w, const float* wx, int kx,
             float* __restrict__ padded, float* __restrict__ tmp) {
  const uint32_t px = static_cast<uint32_t>(kx / 2);
  for (uint32_t y = 0; y < h; ++y) {
    const T* row = src + size_t{y} * w;
    for (uint32_t x = 0; x < w; ++x) padded[px + x] = static_cast<float>(row[x]);
    for (uint32_t i = 1; i <= px; ++i) {
      padded[px - i] = padded[px + i];
      padded[px + w - 1 + i] = padded[px + w - 1 - i];
    }
    float* __restrict__ out = tmp + size_t{y} * w;
    const float w0 = wx[0];
    for (uint32_t x = 0; x < w; ++x) out[x] = w0 * padded[x];
    for (int k = 1; k < kx; ++k) {
      const float wk = wx[k];
      const float* __restrict__ in = padded + k;
      for (uint32_t x = 0; x < w; ++x) out[x] += wk * in[x];
    }
  }
}

// One channel along the columns: output row y sums wy[k] times row y + k - ky / 2 of `tmp`
// (reflected), in float32; `acc` holds w floats (u8 output only).
template <typename T>
void ColumnPass(const float* __restrict__ tmp, uint32_t h, uint32_t w, const float* wy, int ky,
                float* __restrict__ acc, T* __restrict__ dst) {
  const int64_t py = ky / 2;
  for (uint32_t y = 0; y < h; ++y) {
    T* out = dst + size_t{y} * w;
    float* __restrict__ a;
    if constexpr (sizeof(T) == sizeof(float)) {
      a = out;
    } else {
      a = acc;
    }
    const float* __restrict__ first = tmp + Reflect(int64_t{y} - py, h) * w;
    const float w0 = wy[0];
    for (uint32_t x = 0; x < w; ++x) a[x] = w0 * first[x];
    for (int k = 1; k < ky; ++k) {
      const float wk = wy[k];
      const float* __restrict__ in = tmp + Reflect(int64_t{y} + k - py, h) * w;
      for (uint32_t x = 0; x < w; ++x) a[x] += wk * in[x];
    }
    if constexpr (sizeof(T) != sizeof(float)) {
      for (uint32_t x = 0; x < w; ++x) out[x] = RoundToU8(a[x]);
    }
  }
}

template <typename T>
void BlurChannels(const SampleSpec& in, const T* src, T* dst, const float* wx, int kx,
                  const float* wy, int ky, void* scratch) {
  const uint32_t h = in.height, w = in.width;
  const size_t plane = size_t{h} * w;
  char* base = static_cast<char*>(scratch);
  float* tmp = reinterpret_cast<float*>(base);
  float* padded = reinterpret_cast<float*>(base + Aligned64(plane * sizeof(float)));
  float* acc = padded + Aligned64((size_t{w} + 2 * size_t(kx / 2)) * sizeof(float)) / sizeof(float);
  for (uint32_t c = 0; c < in.channels; ++c) {
    RowPass(src + c * plane, h, w, wx, kx, padded, tmp);
    ColumnPass(tmp, h, w, wy, ky, acc, dst + c * plane);
  }
}

}  // namespace

void GaussianKernel1d(int size, float sigma, float* weights) {
  // linspace(-half, half, size) steps by exactly 1 (size odd): the integers -half..half.
  const int half = (size - 1) / 2;
  float sum = 0.0f;
  for (int i = 0; i < size; ++i) {
    const float t = static_cast<float>(i - half) / sigma;
    weights[i] = std::exp(-0.5f * (t * t));
    sum += weights[i];
  }
  for (int i = 0; i < size; ++i) weights[i] /= sum;
}

size_t GaussianBlurScratchBytes(size_t plane_values, uint32_t width, int kx) {
  return Aligned64(plane_values * sizeof(float)) +
         Aligned64((size_t{width} + 2 * size_t(kx / 2)) * sizeof(float)) +
         Aligned64(size_t{width} * sizeof(float));
}

void GaussianBlurChw(const SampleSpec& in, const void* src, void* dst, const float* wx, int kx,
                     const float* wy, int ky, void* scratch) {
  if (in.dtype == ElementType::kU8) {
    BlurChannels(in, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), wx, kx, wy, ky,
                 scratch);
  } else {
    BlurChannels(in, static_cast<const float*>(src), static_cast<float*>(dst), wx, kx, wy, ky,
                 scratch);
  }
}

}  // namespace sluice::transforms_internal
