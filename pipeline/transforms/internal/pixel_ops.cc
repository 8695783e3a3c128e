#include "pipeline/transforms/internal/pixel_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice::transforms_internal {
namespace {

// The blur loops are built once, for any x86-64 (std::fma is glibc's, which uses the CPU's FMA
// where it has one): target_clones' ifunc resolvers crashed the ThreadSanitizer build.
#define SLUICE_PIXEL_CLONES
// The per-value helpers, inlined into each clone (and so built for its instructions).
#define SLUICE_PIXEL_INLINE inline __attribute__((always_inline))

// The u8 ops but the sharpness map each value through a table: one per channel, 256 entries.
using Lut = std::array<uint8_t, 256>;

void ApplyLut(const Lut& lut, uint8_t* data, size_t n) {
  for (size_t i = 0; i < n; ++i) data[i] = lut[data[i]];
}

// Each channel's histogram.
void Histogram(const uint8_t* plane, size_t n, std::array<uint64_t, 256>& hist) {
  hist.fill(0);
  for (size_t i = 0; i < n; ++i) ++hist[plane[i]];
}

// torch's _blend of one value: ratio * x + other * y in float32, clamped to [0, bound].
SLUICE_PIXEL_INLINE float TorchBlend(float ratio, float other, float x, float y, float bound) {
  const float a = ratio * x;
  const float b = other * y;
  return std::min(std::max(a + b, 0.0f), bound);
}

// torch's 3x3 blur weights: ones with 5 in the middle, divided by their sum in float32.
constexpr float kW1 = 1.0f / 13.0f;
constexpr float kW5 = 5.0f / 13.0f;

// torch 1.13's CPU convolution (oneDNN, and im2col + GEMM for one channel) sums each output as
// one fused multiply-add per tap, row-major from 0; std::fma rounds once, as they do (glibc
// picks the FMA instruction where there is one).
SLUICE_PIXEL_INLINE float TorchBlur(const float* up, const float* mid, const float* down,
                                    size_t x) {
  float acc = up[x - 1] * kW1;
  acc = std::fma(up[x], kW1, acc);
  acc = std::fma(up[x + 1], kW1, acc);
  acc = std::fma(mid[x - 1], kW1, acc);
  acc = std::fma(mid[x], kW5, acc);
  acc = std::fma(mid[x + 1], kW1, acc);
  acc = std::fma(down[x - 1], kW1, acc);
  acc = std::fma(down[x], kW1, acc);
  return std::fma(down[x + 1], kW1, acc);
}

// The same blur of u8 values rounded half to even, exactly: the sum S of the weighted
// integers is at most 13 * 255, S / 13 never lies halfway between integers, and float32's
// error stays far below 1/26, so torch's round(conv) is round(S / 13) = (S + 6) / 13.
SLUICE_PIXEL_INLINE uint32_t TorchBlurU8(const uint8_t* up, const uint8_t* mid, const uint8_t* down,
                                         size_t x) {
  const uint32_t s = uint32_t{up[x - 1]} + up[x] + up[x + 1] + mid[x - 1] + 5u * mid[x] +
                     mid[x + 1] + down[x - 1] + down[x] + down[x + 1];
  return (s + 6) / 13;
}

template <typename T>
SLUICE_PIXEL_INLINE T TorchStore(float v) {
  if constexpr (sizeof(T) == 1) return static_cast<uint8_t>(static_cast<int32_t>(v));
  return v;
}

template <typename T>
SLUICE_PIXEL_CLONES void TensorSharpnessPlane(const T* src, T* dst, size_t h, size_t w, float ratio,
                                              float other) {
  constexpr float kBound = sizeof(T) == 1 ? 255.0f : 1.0f;
  auto blend_row_as_is = [&](const T* in, T* out) {  // the border: blurred = the pixel itself
    for (size_t x = 0; x < w; ++x) {
      const float v = static_cast<float>(in[x]);
      out[x] = TorchStore<T>(TorchBlend(ratio, other, v, v, kBound));
    }
  };
  blend_row_as_is(src, dst);
  for (size_t y = 1; y + 1 < h; ++y) {
    const T* up = src + (y - 1) * w;
    const T* mid = up + w;
    const T* down = mid + w;
    T* out = dst + y * w;
    const float first = static_cast<float>(mid[0]);
    out[0] = TorchStore<T>(TorchBlend(ratio, other, first, first, kBound));
    for (size_t x = 1; x + 1 < w; ++x) {
      float blurred;
      if constexpr (sizeof(T) == 1) {
        blurred = static_cast<float>(TorchBlurU8(up, mid, down, x));
      } else {
        blurred = TorchBlur(up, mid, down, x);
      }
      out[x] = TorchStore<T>(TorchBlend(ratio, other, static_cast<float>(mid[x]), blurred, kBound));
    }
    const float last = static_cast<float>(mid[w - 1]);
    out[w - 1] = TorchStore<T>(TorchBlend(ratio, other, last, last, kBound));
  }
  blend_row_as_is(src + (h - 1) * w, dst + (h - 1) * w);
}

// Pillow's KERNEL1x3: three float32 products summed left to right.
SLUICE_PIXEL_INLINE float PilRow(const uint8_t* in, size_t x, float k0, float k1, float k2) {
  return static_cast<float>(in[x - 1]) * k0 + static_cast<float>(in[x]) * k1 +
         static_cast<float>(in[x + 1]) * k2;
}

// Pillow's ImagingFilter3x3 with SMOOTH for one interior pixel: from 0.5 (its rounding offset),
// the row below, this row, the row above (its kernel order), clamped and truncated (clip8).
SLUICE_PIXEL_INLINE uint8_t PilSmooth(const uint8_t* up, const uint8_t* mid, const uint8_t* down,
                                      size_t x) {
  float ss = 0.5f;
  ss += PilRow(down, x, kW1, kW1, kW1);
  ss += PilRow(mid, x, kW1, kW5, kW1);
  ss += PilRow(up, x, kW1, kW1, kW1);
  // clip8: std::max and std::min are the selects (ss < 0 ? 0 : ss) that vectorize.
  return static_cast<uint8_t>(static_cast<int32_t>(std::min(std::max(ss, 0.0f), 255.0f)));
}

// ImagingBlend(degenerate, image, alpha) of one value, alpha not 0 or 1: clipped when alpha
// lies outside [0, 1] (inside, the value lies between the two).
template <bool kClip>
SLUICE_PIXEL_INLINE uint8_t PilBlend(int degenerate, int x, float alpha) {
  float v = static_cast<float>(degenerate) + alpha * static_cast<float>(x - degenerate);
  if constexpr (kClip) v = std::min(std::max(v, 0.0f), 255.0f);  // <= 0: 0, >= 255: 255
  return static_cast<uint8_t>(static_cast<int32_t>(v));
}

// One interior row: the smoothed values (kMode 0, alpha 0: Image.blend's shortcut, the
// degenerate image) or blended with them (1: alpha in [0, 1]; 2: clipped).
template <int kMode>
SLUICE_PIXEL_CLONES void PilSharpnessRow(const uint8_t* __restrict up,
                                         const uint8_t* __restrict mid,
                                         const uint8_t* __restrict down, uint8_t* __restrict out,
                                         size_t w, float alpha) {
  for (size_t x = 1; x + 1 < w; ++x) {
    const uint8_t d = PilSmooth(up, mid, down, x);
    if constexpr (kMode == 0) {
      out[x] = d;
    } else {
      out[x] = PilBlend<kMode == 2>(d, mid[x], alpha);
    }
  }
}

void PilSharpnessPlane(const uint8_t* src, uint8_t* dst, size_t h, size_t w, float alpha) {
  const int mode = alpha == 0.0f ? 0 : (alpha >= 0.0f && alpha <= 1.0f ? 1 : 2);
  // The border's degenerate value is the pixel: d + alpha * 0 is d, exactly.
  std::memcpy(dst, src, w);
  for (size_t y = 1; y + 1 < h; ++y) {
    const uint8_t* up = src + (y - 1) * w;
    const uint8_t* mid = up + w;
    const uint8_t* down = mid + w;
    uint8_t* out = dst + y * w;
    out[0] = mid[0];
    if (mode == 0) {
      PilSharpnessRow<0>(up, mid, down, out, w, alpha);
    } else if (mode == 1) {
      PilSharpnessRow<1>(up, mid, down, out, w, alpha);
    } else {
      PilSharpnessRow<2>(up, mid, down, out, w, alpha);
    }
    out[w - 1] = mid[w - 1];
  }
  std::memcpy(dst + (h - 1) * w, src + (h - 1) * w, w);
}

}  // namespace

absl::Status CheckPixelOpInput(absl::string_view op, const SampleSpec& in, bool f32_too, bool pil) {
  RETURN_IF_ERROR(CheckChannelsFirst(op, in));
  if (in.channels != 1 && in.channels != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected 1 or 3 channels (as torchvision), got ", SampleSpecString(in)));
  }
  if (in.dtype == ElementType::kU8) return absl::OkStatus();
  if (pil) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": pil=True is PIL's arithmetic on 8-bit images: expected u8 samples, got ",
        SampleSpecString(in),
        "; put it before Normalize or ToDtype, or use pil=False (torchvision's tensor path)"));
  }
  if (!f32_too) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected u8 samples (torchvision takes uint8 images only here), got ",
        SampleSpecString(in),
        "; put it before Normalize and ToDtype (before ToTensor in a torchvision pipeline)"));
  }
  if (in.dtype != ElementType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expected u8 or f32 samples, got ",
                                                   SampleSpecString(in),
                                                   "; put ToDtype(float32) before it"));
  }
  return absl::OkStatus();
}

void TensorInvert(const SampleSpec& s, void* data) {
  const size_t n = s.values();
  if (s.dtype == ElementType::kU8) {
    uint8_t* p = static_cast<uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(255 - p[i]);
  } else {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = 1.0f - p[i];
  }
}

void TensorPosterize(const SampleSpec& s, void* data, int bits) {
  const uint8_t mask = static_cast<uint8_t>(~((1u << (8 - bits)) - 1u));
  uint8_t* p = static_cast<uint8_t*>(data);
  const size_t n = s.values();
  for (size_t i = 0; i < n; ++i) p[i] &= mask;
}

void TensorSolarize(const SampleSpec& s, void* data, double threshold) {
  const float t = static_cast<float>(threshold);  // torch compares in float32
  const size_t n = s.values();
  if (s.dtype == ElementType::kU8) {
    Lut lut;
    for (int v = 0; v < 256; ++v) {
      lut[v] = static_cast<uint8_t>(static_cast<float>(v) >= t ? 255 - v : v);
    }
    ApplyLut(lut, static_cast<uint8_t*>(data), n);
  } else {
    float* p = static_cast<float*>(data);
    for (size_t i = 0; i < n; ++i) p[i] = p[i] >= t ? 1.0f - p[i] : p[i];
  }
}

void TensorAutocontrast(const SampleSpec& s, void* data) {
  const size_t plane = s.plane_values();
  if (plane == 0) return;
  for (uint32_t c = 0; c < s.channels; ++c) {
    if (s.dtype == ElementType::kU8) {
      uint8_t* p = static_cast<uint8_t*>(data) + c * plane;
      const auto [lo_it, hi_it] = std::minmax_element(p, p + plane);
      float lo = *lo_it;
      // torch's `bound / (max - min)` is Tensor.__rtruediv__: reciprocal, then times bound.
      float scale = (1.0f / (static_cast<float>(*hi_it) - lo)) * 255.0f;
      if (!std::isfinite(scale)) lo = 0.0f, scale = 1.0f;
      Lut lut;
      for (int v = 0; v < 256; ++v) {
        const float out = std::min(std::max((static_cast<float>(v) - lo) * scale, 0.0f), 255.0f);
        lut[v] = static_cast<uint8_t>(static_cast<int32_t>(out));
      }
      ApplyLut(lut, p, plane);
    } else {
      float* p = static_cast<float*>(data) + c * plane;
      float lo = p[0], hi = p[0];
      for (size_t i = 1; i < plane; ++i) {
        lo = std::min(lo, p[i]);
        hi = std::max(hi, p[i]);
      }
      float scale = (1.0f / (hi - lo)) * 1.0f;
      if (!std::isfinite(scale)) lo = 0.0f, scale = 1.0f;
      for (size_t i = 0; i < plane; ++i) {
        p[i] = std::min(std::max((p[i] - lo) * scale, 0.0f), 1.0f);
      }
    }
  }
}

void TensorEqualize(const SampleSpec& s, void* data) {
  const size_t plane = s.plane_values();
  std::array<uint64_t, 256> hist;
  for (uint32_t c = 0; c < s.channels; ++c) {
    uint8_t* p = static_cast<uint8_t*>(data) + c * plane;
    Histogram(p, plane, hist);
    int last = 255;
    while (last >= 0 && hist[last] == 0) --last;
    if (last < 0) continue;  // an empty plane
    const uint64_t step = (plane - hist[last]) / 255;
    if (step == 0) continue;
    Lut lut;
    uint64_t cumulative = 0;  // the count of the values below v
    for (int v = 0; v < 256; ++v) {
      lut[v] = static_cast<uint8_t>(std::min<uint64_t>((cumulative + step / 2) / step, 255));
      cumulative += hist[v];
    }
    ApplyLut(lut, p, plane);
  }
}

void PilAutocontrast(const SampleSpec& s, void* data) {
  const size_t plane = s.plane_values();
  std::array<uint64_t, 256> hist;
  for (uint32_t c = 0; c < s.channels; ++c) {
    uint8_t* p = static_cast<uint8_t*>(data) + c * plane;
    Histogram(p, plane, hist);
    int lo = 0, hi = 255;
    while (lo < 255 && hist[lo] == 0) ++lo;
    while (hi > 0 && hist[hi] == 0) --hi;
    if (hi <= lo) continue;
    const double scale = 255.0 / (hi - lo);
    const double offset = -lo * scale;
    Lut lut;
    for (int v = 0; v < 256; ++v) {
      const double out = v * scale + offset;  // Python's int() truncates toward zero
      lut[v] = static_cast<uint8_t>(std::clamp(static_cast<int>(out), 0, 255));
    }
    ApplyLut(lut, p, plane);
  }
}

void TensorSharpness(const SampleSpec& s, const void* src, void* dst, double factor) {
  const size_t h = s.height, w = s.width, plane = s.plane_values();
  if (h <= 2 || w <= 2) {
    std::memcpy(dst, src, s.bytes());
    return;
  }
  // torch casts the ratio and Python's 1.0 - ratio (a double) to float32.
  const float ratio = static_cast<float>(factor);
  const float other = static_cast<float>(1.0 - factor);
  for (uint32_t c = 0; c < s.channels; ++c) {
    if (s.dtype == ElementType::kU8) {
      TensorSharpnessPlane(static_cast<const uint8_t*>(src) + c * plane,
                           static_cast<uint8_t*>(dst) + c * plane, h, w, ratio, other);
    } else {
      TensorSharpnessPlane(static_cast<const float*>(src) + c * plane,
                           static_cast<float*>(dst) + c * plane, h, w, ratio, other);
    }
  }
}

void PilSharpness(const SampleSpec& s, const void* src, void* dst, double factor) {
  const size_t h = s.height, w = s.width, plane = s.plane_values();
  const float alpha = static_cast<float>(factor);  // Image.blend's alpha is a C float
  // A filter larger than the image copies it (ImagingFilter), and alpha 1 is the image.
  if (h < 3 || w < 3 || alpha == 1.0f) {
    std::memcpy(dst, src, s.bytes());
    return;
  }
  for (uint32_t c = 0; c < s.channels; ++c) {
    PilSharpnessPlane(static_cast<const uint8_t*>(src) + c * plane,
                      static_cast<uint8_t*>(dst) + c * plane, h, w, alpha);
  }
}

}  // namespace sluice::transforms_internal
