#include "pipeline/transforms/internal/bilinear.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "pipeline/transforms/internal/elements.h"

namespace sluice::transforms_internal {

// torch's area_pixel_compute_source_index and compute_source_index_and_lambda: the scale is a
// float32 ratio, the source coordinate and its fraction are computed in double (as torch 1.13's
// CPU kernel evaluates them: the oracle test probes its weights) and the weights stored as float.
BilinearTap BilinearTapOf(int64_t d, float scale, int64_t n) {
  double s = static_cast<double>(scale) * (static_cast<double>(d) + 0.5) - 0.5;
  if (s < 0) s = 0;
  BilinearTap t;
  t.i0 = static_cast<int64_t>(s);
  t.i1 = t.i0 + (t.i0 < n - 1 ? 1 : 0);
  const double l1 = s - static_cast<double>(t.i0);
  t.l1 = static_cast<float>(l1);
  t.l0 = static_cast<float>(1.0 - l1);
  return t;
}

namespace {

struct U8 {
  using T = uint8_t;
  static float Load(const T* p, int64_t i) { return p[i]; }
  // Rounds half to even like nearbyint (v is in [0, 255]): adding and subtracting 2^23 leaves
  // no fraction bits, in the default rounding mode; nearbyint is a libm call without SSE4.1.
  static void Store(T* p, int64_t i, float v) {
    p[i] = static_cast<uint8_t>((v + 0x1.0p23f) - 0x1.0p23f);
  }
};
struct F32 {
  using T = float;
  static float Load(const T* p, int64_t i) { return p[i]; }
  static void Store(T* p, int64_t i, float v) { p[i] = v; }
};
// f16 and bf16: widened to float32 and rounded back to nearest even, as torchvision's resize
// does through its float32 cast.
template <ElementType kType>
struct Half {
  using T = uint16_t;
  static float Load(const T* p, int64_t i) { return LoadAsFloat(kType, p + i); }
  static void Store(T* p, int64_t i, float v) { StoreFromFloat(kType, v, p + i); }
};

// Separable, with the float32 operations of the direct formula: each needed source row is
// interpolated along x once into a float row (l0x * v0 + l1x * v1), then two such rows are
// blended along y (l0y * top + l1y * bottom), a contiguous loop the compiler vectorizes.
// Consecutive source rows differ in parity, so row r lives in slot r % 2 and the two rows one
// output row needs never evict each other; a downscale by less than 2 reuses most rows.
template <typename E>
void Resize(const SampleSpec& spec, const void* src, uint32_t top, uint32_t left, uint32_t win_h,
            uint32_t win_w, uint32_t out_h, uint32_t out_w, void* dst) {
  using T = typename E::T;
  const float scale_y = static_cast<float>(win_h) / static_cast<float>(out_h);
  const float scale_x = static_cast<float>(win_w) / static_cast<float>(out_w);
  const size_t plane = spec.plane_values();
  const T* in = static_cast<const T*>(src) + size_t{top} * spec.width + left;
  T* out = static_cast<T*>(dst);
  // Columns in tiles, so that their taps and rows fit on the stack for any output width.
  constexpr uint32_t kTile = 256;
  BilinearTap xs[kTile];
  float rows[2][kTile];
  for (uint32_t x0 = 0; x0 < out_w; x0 += kTile) {
    const uint32_t n = std::min(out_w - x0, kTile);
    for (uint32_t x = 0; x < n; ++x) xs[x] = BilinearTapOf(x0 + x, scale_x, win_w);
    for (uint32_t c = 0; c < spec.channels; ++c) {
      const T* in_plane = in + c * plane;
      T* out_plane = out + c * size_t{out_h} * out_w + x0;
      int64_t row_in_slot[2] = {-1, -1};
      auto row = [&](int64_t r) -> const float* {
        float* slot = rows[r & 1];
        if (row_in_slot[r & 1] != r) {
          const T* source = in_plane + r * spec.width;
          for (uint32_t x = 0; x < n; ++x) {
            slot[x] = xs[x].l0 * E::Load(source, xs[x].i0) + xs[x].l1 * E::Load(source, xs[x].i1);
          }
          row_in_slot[r & 1] = r;
        }
        return slot;
      };
      for (uint32_t y = 0; y < out_h; ++y) {
        const BilinearTap ty = BilinearTapOf(y, scale_y, win_h);
        const float* top_row = row(ty.i0);
        const float* bottom_row = row(ty.i1);
        T* o = out_plane + size_t{y} * out_w;
        for (uint32_t x = 0; x < n; ++x) E::Store(o, x, ty.l0 * top_row[x] + ty.l1 * bottom_row[x]);
      }
    }
  }
}
}  // namespace

void ResizeBilinear(const SampleSpec& spec, const void* src, uint32_t top, uint32_t left,
                    uint32_t win_h, uint32_t win_w, uint32_t out_h, uint32_t out_w, void* dst) {
  switch (spec.dtype) {
    case ElementType::kU8:
      return Resize<U8>(spec, src, top, left, win_h, win_w, out_h, out_w, dst);
    case ElementType::kF32:
      return Resize<F32>(spec, src, top, left, win_h, win_w, out_h, out_w, dst);
    case ElementType::kF16:
      return Resize<Half<ElementType::kF16>>(spec, src, top, left, win_h, win_w, out_h, out_w, dst);
    case ElementType::kBF16:
      return Resize<Half<ElementType::kBF16>>(spec, src, top, left, win_h, win_w, out_h, out_w,
                                              dst);
  }
}

}  // namespace sluice::transforms_internal
