#include "pipeline/transforms/internal/color.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "pipeline/transforms/internal/isa_dispatch.h"
#include "pipeline/transforms/internal/luma.h"

namespace sluice::transforms_internal {
namespace {

// torch's _blend for one value: ratio * x + (1 - ratio) * y, clamped to [0, bound]. `other` is
// (1 - ratio) rounded once to float32 (Python computes it in double, torch casts the scalar).
inline float Blend(float ratio, float other, float x, float y, float bound) {
  const float a = ratio * x;
  const float b = other * y;
  return std::min(std::max(a + b, 0.0f), bound);
}

inline float OtherOf(float ratio) { return static_cast<float>(1.0 - static_cast<double>(ratio)); }

// The grey plane a blend needs, one value at a time: torch's rgb_to_grayscale in the sample's
// dtype (u8 truncated).
template <typename T>
inline float TensorGrey(const T* r, const T* g, const T* b, size_t i) {
  const float l =
      TensorLuma(static_cast<float>(r[i]), static_cast<float>(g[i]), static_cast<float>(b[i]));
  if constexpr (sizeof(T) == 1) return static_cast<float>(static_cast<int32_t>(l));
  return l;
}

template <typename T>
inline T Store(float v) {
  // In [0, 255]: truncates (through int32, which vectorizes).
  if constexpr (sizeof(T) == 1) return static_cast<uint8_t>(static_cast<int32_t>(v));
  return v;
}

template <typename T>
constexpr float Bound() {
  return sizeof(T) == 1 ? 255.0f : 1.0f;
}

SLUICE_AVX2_DISPATCH(void, BlendU8,
                     (uint8_t* __restrict data, size_t n, float factor, float other, float y),
                     (data, n, factor, other, y)) {
  for (size_t i = 0; i < n; ++i) {
    data[i] = Store<uint8_t>(Blend(factor, other, static_cast<float>(data[i]), y, 255.0f));
  }
}

SLUICE_AVX2_DISPATCH(void, BlendF32,
                     (float* __restrict data, size_t n, float factor, float other, float y),
                     (data, n, factor, other, y)) {
  for (size_t i = 0; i < n; ++i) data[i] = Blend(factor, other, data[i], y, 1.0f);
}

void BlendWithScalar(const SampleSpec& s, uint8_t* data, float factor, float y) {
  BlendU8(data, s.values(), factor, OtherOf(factor), y);
}

void BlendWithScalar(const SampleSpec& s, float* data, float factor, float y) {
  BlendF32(data, s.values(), factor, OtherOf(factor), y);
}

// The sum of torch's truncated grey values of a u8 image.
SLUICE_AVX2_DISPATCH(uint64_t, GreySumU8,
                     (const uint8_t* __restrict r, const uint8_t* __restrict g,
                      const uint8_t* __restrict b, size_t n),
                     (r, g, b, n)) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<uint32_t>(TensorGrey(r, g, b, i));
  return sum;
}

template <typename T>
void Contrast(const SampleSpec& s, T* data, float factor) {
  const size_t plane = s.plane_values();
  float mean;
  if constexpr (sizeof(T) == 1) {
    // Integers: the sum is exact (torch's float32 sum is too, below 2^24).
    uint64_t sum = 0;
    if (s.channels == 3) {
      sum = GreySumU8(data, data + plane, data + 2 * plane, plane);
    } else {
      for (size_t i = 0; i < plane; ++i) sum += data[i];
    }
    mean = static_cast<float>(sum) / static_cast<float>(plane);
  } else {
    double sum = 0;
    if (s.channels == 3) {
      for (size_t i = 0; i < plane; ++i) sum += TensorGrey(data, data + plane, data + 2 * plane, i);
    } else {
      for (size_t i = 0; i < plane; ++i) sum += data[i];
    }
    mean = static_cast<float>(sum) / static_cast<float>(plane);
  }
  BlendWithScalar(s, data, factor, mean);
}

SLUICE_AVX2_DISPATCH(void, SaturationU8,
                     (uint8_t* __restrict r, uint8_t* __restrict g, uint8_t* __restrict b, size_t n,
                      float factor, float other),
                     (r, g, b, n, factor, other)) {
  for (size_t i = 0; i < n; ++i) {
    const float y = TensorGrey(r, g, b, i);
    r[i] = Store<uint8_t>(Blend(factor, other, static_cast<float>(r[i]), y, 255.0f));
    g[i] = Store<uint8_t>(Blend(factor, other, static_cast<float>(g[i]), y, 255.0f));
    b[i] = Store<uint8_t>(Blend(factor, other, static_cast<float>(b[i]), y, 255.0f));
  }
}

SLUICE_AVX2_DISPATCH(void, SaturationF32,
                     (float* __restrict r, float* __restrict g, float* __restrict b, size_t n,
                      float factor, float other),
                     (r, g, b, n, factor, other)) {
  for (size_t i = 0; i < n; ++i) {
    const float y = TensorGrey(r, g, b, i);
    r[i] = Blend(factor, other, r[i], y, 1.0f);
    g[i] = Blend(factor, other, g[i], y, 1.0f);
    b[i] = Blend(factor, other, b[i], y, 1.0f);
  }
}

template <typename T>
void Saturation(const SampleSpec& s, T* data, float factor) {
  if (s.channels != 3) return;
  const size_t plane = s.plane_values();
  if constexpr (sizeof(T) == 1) {
    SaturationU8(data, data + plane, data + 2 * plane, plane, factor, OtherOf(factor));
  } else {
    SaturationF32(data, data + plane, data + 2 * plane, plane, factor, OtherOf(factor));
  }
}

inline float Clamp01(float v) { return std::min(std::max(v, 0.0f), 1.0f); }

// torchvision's _rgb2hsv, the hue shift and _hsv2rgb for one pixel in [0, 1], without branches
// (so the loops below vectorize), each step the float32 operation torch makes:
//   h / 6 + 1 lies in [5/6, 11/6), so fmod(., 1) is a subtraction of 1 at or above 1 (exact);
//   h + hue lies in [-0.5, 1.5), so torch.remainder(., 1) adds or subtracts 1 the same way
//   (fmod leaves a negative value as it is, then remainder adds 1, rounding as here);
//   h * 6 is at least 0 (or -0), so its floor is its truncation; i % 6 only folds 6 to 0.
inline void HueShift(float r, float g, float b, float hue, float& out_r, float& out_g,
                     float& out_b) {
  const float max_rg = r < g ? g : r;  // values, not std::max's references: selects
  const float maxc = max_rg < b ? b : max_rg;
  const float min_rg = g < r ? g : r;
  const float minc = b < min_rg ? b : min_rg;
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  // torch divides by 1 where maxc == minc (the numerators are 0 there, so any divisor but 0
  // gives the same 0). Written as arithmetic, not a select: a compiler would turn a select of
  // divisors into a branch around the division (it may trap), and the loop would not vectorize.
  const float equal = static_cast<float>(eqc);
  const float s = cr / (maxc + equal * (1.0f - maxc));  // maxc + 0 where they differ: maxc
  const float divisor = cr + equal;                     // cr is 0 where they are equal
  const float rc = (maxc - r) / divisor;
  const float gc = (maxc - g) / divisor;
  const float bc = (maxc - b) / divisor;
  // A mask times a value, as torch multiplies them: 0 * x is a zero of x's sign.
  const float hr = static_cast<float>(maxc == r) * (bc - gc);
  const float hg = static_cast<float>((maxc == g) & (maxc != r)) * ((2.0f + rc) - bc);
  const float hb = static_cast<float>((maxc != g) & (maxc != r)) * ((4.0f + gc) - rc);
  float h = (hr + hg) + hb;
  // Both arms first, then a select: -ftrapping-math keeps a compiler from computing an arm
  // that a branch skips, so a ternary over two operations would stay a branch.
  h = h / 6.0f + 1.0f;
  const float h_less = h - 1.0f;
  h = h >= 1.0f ? h_less : h;
  h = h + hue;
  const float h_down = h - 1.0f;
  const float h_up = h + 1.0f;
  h = h >= 1.0f ? h_down : (h < 0.0f ? h_up : h);
  const float v = maxc;
  const float h6 = h * 6.0f;
  const int truncated = static_cast<int>(h6);
  const float f = h6 - static_cast<float>(truncated);
  const int sector = truncated == 6 ? 0 : truncated;
  const float p = Clamp01(v * (1.0f - s));
  const float q = Clamp01(v * (1.0f - s * f));
  const float t = Clamp01(v * (1.0f - s * (1.0f - f)));
  // (r, g, b) by sector: 0 (v, t, p), 1 (q, v, p), 2 (p, v, t), 3 (p, q, v), 4 (t, p, v),
  // 5 (v, p, q).
  out_r = (sector == 0) | (sector == 5) ? v : (sector == 1 ? q : (sector == 4 ? t : p));
  out_g = sector == 0 ? t : ((sector == 1) | (sector == 2) ? v : (sector == 3 ? q : p));
  out_b = (sector == 0) | (sector == 1) ? p : (sector == 2 ? t : (sector == 5 ? q : v));
}

SLUICE_AVX2_DISPATCH(void, HueF32,
                     (float* __restrict r, float* __restrict g, float* __restrict b, size_t n,
                      float hue),
                     (r, g, b, n, hue)) {
  for (size_t i = 0; i < n; ++i) HueShift(r[i], g[i], b[i], hue, r[i], g[i], b[i]);
}

SLUICE_AVX2_DISPATCH(void, HueU8,
                     (uint8_t* __restrict r, uint8_t* __restrict g, uint8_t* __restrict b, size_t n,
                      float hue),
                     (r, g, b, n, hue)) {
  for (size_t i = 0; i < n; ++i) {
    float out_r, out_g, out_b;
    HueShift(static_cast<float>(r[i]) / 255.0f, static_cast<float>(g[i]) / 255.0f,
             static_cast<float>(b[i]) / 255.0f, hue, out_r, out_g, out_b);
    r[i] = static_cast<uint8_t>(static_cast<int32_t>(out_r * 255.0f));
    g[i] = static_cast<uint8_t>(static_cast<int32_t>(out_g * 255.0f));
    b[i] = static_cast<uint8_t>(static_cast<int32_t>(out_b * 255.0f));
  }
}

template <typename T>
void Hue(const SampleSpec& s, T* data, float hue) {
  if (s.channels != 3) return;
  const size_t plane = s.plane_values();
  if constexpr (sizeof(T) == 1) {
    HueU8(data, data + plane, data + 2 * plane, plane, hue);
  } else {
    HueF32(data, data + plane, data + 2 * plane, plane, hue);
  }
}

// ImagingBlend(in1, in2, alpha) for one value (alpha not 0 or 1, which copy an input):
// in1 + alpha * (in2 - in1) in float, truncated; clipped first when alpha lies outside [0, 1]
// (inside it the value lies between the two inputs).
inline uint8_t PilMix(float in1, float in2, float alpha, bool clip) {
  float v = in1 + alpha * (in2 - in1);
  if (clip) v = std::min(std::max(v, 0.0f), 255.0f);
  return static_cast<uint8_t>(static_cast<int>(v));
}

inline bool PilClips(float alpha) { return !(alpha >= 0 && alpha <= 1.0f); }

SLUICE_AVX2_DISPATCH(void, PilBlendU8, (uint8_t* __restrict data, size_t n, float alpha, float in1),
                     (data, n, alpha, in1)) {
  if (PilClips(alpha)) {
    for (size_t i = 0; i < n; ++i) data[i] = PilMix(in1, data[i], alpha, true);
  } else {
    for (size_t i = 0; i < n; ++i) data[i] = PilMix(in1, data[i], alpha, false);
  }
}

// Image.blend(degenerate, image, alpha) with a degenerate of one value everywhere.
void PilBlendWithScalar(const SampleSpec& s, uint8_t* data, float alpha, int degenerate) {
  const size_t n = s.values();
  if (alpha == 0.0f) {
    std::fill(data, data + n, static_cast<uint8_t>(degenerate));
    return;
  }
  if (alpha == 1.0f) return;
  PilBlendU8(data, n, alpha, static_cast<float>(degenerate));
}

SLUICE_AVX2_DISPATCH(uint64_t, PilLumaSum,
                     (const uint8_t* __restrict r, const uint8_t* __restrict g,
                      const uint8_t* __restrict b, size_t n),
                     (r, g, b, n)) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += PilLuma(r[i], g[i], b[i]);
  return sum;
}

SLUICE_AVX2_DISPATCH(void, PilSaturationU8,
                     (uint8_t* __restrict r, uint8_t* __restrict g, uint8_t* __restrict b, size_t n,
                      float alpha),
                     (r, g, b, n, alpha)) {
  const bool clip = PilClips(alpha);
  if (clip) {
    for (size_t i = 0; i < n; ++i) {
      const float l = PilLuma(r[i], g[i], b[i]);
      r[i] = PilMix(l, r[i], alpha, true);
      g[i] = PilMix(l, g[i], alpha, true);
      b[i] = PilMix(l, b[i], alpha, true);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const float l = PilLuma(r[i], g[i], b[i]);
      r[i] = PilMix(l, r[i], alpha, false);
      g[i] = PilMix(l, g[i], alpha, false);
      b[i] = PilMix(l, b[i], alpha, false);
    }
  }
}

// Pillow's rgb2hsv_row: H, S, V bytes (float and double arithmetic as Pillow's C writes it).
inline void PilRgbToHsv(uint8_t r, uint8_t g, uint8_t b, uint8_t hsv[3]) {
  const uint8_t maxc = std::max(r, std::max(g, b));
  const uint8_t minc = std::min(r, std::min(g, b));
  hsv[2] = maxc;
  if (minc == maxc) {
    hsv[0] = hsv[1] = 0;
    return;
  }
  const float cr = static_cast<float>(maxc - minc);
  const float s = cr / static_cast<float>(maxc);
  const float rc = static_cast<float>(maxc - r) / cr;
  const float gc = static_cast<float>(maxc - g) / cr;
  const float bc = static_cast<float>(maxc - b) / cr;
  float h;
  if (r == maxc) {
    h = bc - gc;
  } else if (g == maxc) {
    h = static_cast<float>(2.0 + static_cast<double>(rc) - static_cast<double>(bc));
  } else {
    h = static_cast<float>(4.0 + static_cast<double>(gc) - static_cast<double>(rc));
  }
  h = static_cast<float>(std::fmod(static_cast<double>(h) / 6.0 + 1.0, 1.0));
  hsv[0] =
      static_cast<uint8_t>(std::clamp(static_cast<int>(static_cast<double>(h) * 255.0), 0, 255));
  hsv[1] =
      static_cast<uint8_t>(std::clamp(static_cast<int>(static_cast<double>(s) * 255.0), 0, 255));
}

inline uint8_t Clip8(double v) {
  return static_cast<uint8_t>(std::clamp(static_cast<int>(std::round(v)), 0, 255));
}

// Pillow's hsv2rgb for one pixel.
inline void PilHsvToRgb(uint8_t h, uint8_t s, uint8_t v, uint8_t rgb[3]) {
  if (s == 0) {
    rgb[0] = rgb[1] = rgb[2] = v;
    return;
  }
  const double h6 = static_cast<double>(static_cast<float>(h)) * 6.0 / 255.0;
  const int i = static_cast<int>(std::floor(h6));
  const float f = static_cast<float>(h6 - static_cast<double>(static_cast<float>(i)));
  const float fs = static_cast<float>(static_cast<double>(static_cast<float>(s)) / 255.0);
  const double fv = static_cast<float>(v);
  const uint8_t p = Clip8(fv * (1.0 - static_cast<double>(fs)));
  const float fsf = fs * f;  // float * float: Pillow rounds the product to float
  const uint8_t q = Clip8(fv * (1.0 - static_cast<double>(fsf)));
  const uint8_t t = Clip8(fv * (1.0 - static_cast<double>(fs) * (1.0 - static_cast<double>(f))));
  switch (i % 6) {
    case 0:
      rgb[0] = v, rgb[1] = t, rgb[2] = p;
      break;
    case 1:
      rgb[0] = q, rgb[1] = v, rgb[2] = p;
      break;
    case 2:
      rgb[0] = p, rgb[1] = v, rgb[2] = t;
      break;
    case 3:
      rgb[0] = p, rgb[1] = q, rgb[2] = v;
      break;
    case 4:
      rgb[0] = t, rgb[1] = p, rgb[2] = v;
      break;
    default:
      rgb[0] = v, rgb[1] = p, rgb[2] = q;
      break;
  }
}

}  // namespace

void TensorBrightness(const SampleSpec& s, void* data, float factor) {
  if (s.dtype == ElementType::kU8) {
    BlendWithScalar(s, static_cast<uint8_t*>(data), factor, 0.0f);
  } else {
    BlendWithScalar(s, static_cast<float*>(data), factor, 0.0f);
  }
}

void TensorContrast(const SampleSpec& s, void* data, float factor) {
  if (s.dtype == ElementType::kU8) {
    Contrast(s, static_cast<uint8_t*>(data), factor);
  } else {
    Contrast(s, static_cast<float*>(data), factor);
  }
}

void TensorSaturation(const SampleSpec& s, void* data, float factor) {
  if (s.dtype == ElementType::kU8) {
    Saturation(s, static_cast<uint8_t*>(data), factor);
  } else {
    Saturation(s, static_cast<float*>(data), factor);
  }
}

void TensorHue(const SampleSpec& s, void* data, float hue) {
  if (s.dtype == ElementType::kU8) {
    Hue(s, static_cast<uint8_t*>(data), hue);
  } else {
    Hue(s, static_cast<float*>(data), hue);
  }
}

void PilBrightness(const SampleSpec& s, void* data, float factor) {
  PilBlendWithScalar(s, static_cast<uint8_t*>(data), factor, 0);
}

void PilContrast(const SampleSpec& s, void* data, float factor) {
  uint8_t* p = static_cast<uint8_t*>(data);
  const size_t plane = s.plane_values();
  uint64_t sum = 0;  // ImageStat's mean of the L image: its histogram's sum over its count
  if (s.channels == 3) {
    sum = PilLumaSum(p, p + plane, p + 2 * plane, plane);
  } else {
    for (size_t i = 0; i < plane; ++i) sum += p[i];
  }
  const double mean = static_cast<double>(sum) / static_cast<double>(plane);
  PilBlendWithScalar(s, p, factor, static_cast<int>(mean + 0.5));
}

void PilSaturation(const SampleSpec& s, void* data, float factor) {
  if (s.channels != 3) return;  // convert("L") of an L image is the image: the blend keeps it
  uint8_t* r = static_cast<uint8_t*>(data);
  const size_t plane = s.plane_values();
  uint8_t* g = r + plane;
  uint8_t* b = g + plane;
  if (factor == 1.0f) return;
  if (factor == 0.0f) {  // the L image itself
    for (size_t i = 0; i < plane; ++i) r[i] = g[i] = b[i] = PilLuma(r[i], g[i], b[i]);
    return;
  }
  PilSaturationU8(r, g, b, plane, factor);
}

void PilHue(const SampleSpec& s, void* data, float hue) {
  if (s.channels != 3) return;
  // np.uint8(hue * 255): the double truncated toward zero, then taken modulo 256.
  const auto shift = static_cast<uint8_t>(
      static_cast<int64_t>(std::trunc(static_cast<double>(hue) * 255.0)) & 0xFF);
  uint8_t* r = static_cast<uint8_t*>(data);
  const size_t plane = s.plane_values();
  uint8_t* g = r + plane;
  uint8_t* b = g + plane;
  uint8_t hsv[3], rgb[3];
  for (size_t i = 0; i < plane; ++i) {
    PilRgbToHsv(r[i], g[i], b[i], hsv);
    PilHsvToRgb(static_cast<uint8_t>(hsv[0] + shift), hsv[1], hsv[2], rgb);
    r[i] = rgb[0], g[i] = rgb[1], b[i] = rgb[2];
  }
}

}  // namespace sluice::transforms_internal
