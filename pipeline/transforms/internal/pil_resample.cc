#include "pipeline/transforms/internal/pil_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "pipeline/transforms/internal/isa_dispatch.h"

namespace sluice::transforms_internal {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's PRECISION_BITS

double BilinearFilter(double x) {
  if (x < 0.0) x = -x;
  if (x < 1.0) return 1.0 - x;
  return 0.0;
}

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One axis's taps: for output coordinate d, weights[d * ksize, + bounds[2d + 1]) apply to the
// inputs from bounds[2d] on. PIL's precompute_coeffs and normalize_coeffs_8bpc, the box being
// the whole axis.
struct Taps {
  int ksize = 0;
  std::vector<int> bounds;
  std::vector<int32_t> weights;
  std::vector<double> exact;  // the weights before rounding (reused between calls)
};

void ComputeTaps(int in_size, int out_size, PilFilter filter, Taps* t) {
  const double filter_support = filter == PilFilter::kBilinear ? 1.0 : 2.0;
  double (*const f)(double) = filter == PilFilter::kBilinear ? BilinearFilter : BicubicFilter;
  // PIL's box is floats: (double)(in1 - in0) / outSize with in0 = 0.
  const float in0 = 0.0f, in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter_support * filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t->ksize = ksize;
  t->bounds.assign(static_cast<size_t>(out_size) * 2, 0);
  t->exact.assign(static_cast<size_t>(out_size) * ksize, 0.0);
  t->weights.assign(static_cast<size_t>(out_size) * ksize, 0);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    double ww = 0.0;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double* k = &t->exact[static_cast<size_t>(xx) * ksize];
    for (int x = 0; x < xmax; ++x) {
      const double w = f((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[x] /= ww;
    }
    t->bounds[static_cast<size_t>(xx) * 2] = xmin;
    t->bounds[static_cast<size_t>(xx) * 2 + 1] = xmax;
  }
  for (size_t i = 0; i < t->exact.size(); ++i) {
    const double v = t->exact[i];
    t->weights[i] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                          : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
  }
}

inline uint8_t Clip8(int32_t in) {
  if (in >= (1 << kPrecisionBits << 8)) return 255;
  if (in <= 0) return 0;
  return static_cast<uint8_t>(in >> kPrecisionBits);
}

struct Scratch {
  Taps horizontal, vertical;
  std::vector<uint8_t> rows;   // the horizontal pass's output: channels x rows x out_w
  std::vector<int32_t> sums;   // one output row's sums in the vertical pass
  std::vector<uint8_t> block;  // a transposed block of kBlock source rows
};

// The horizontal pass over blocks of kBlock rows at a time: the block is transposed (column x of
// its rows is kBlock bytes at t[x * kBlock]), so each tap adds kBlock rows' values at once, a
// vector the compiler makes of the inner loop. Integer sums: the same bits as PIL's order.
constexpr int kBlock = 16;

// Rows [y0, y0 + n) of channel c, transposed into t (width x kBlock bytes); rows n and on of
// the block are zero.
void TransposeBlock(const U8ImageView& src, uint32_t c, int y0, int n, uint8_t* t) {
  const uint8_t* rows[kBlock];
  for (int r = 0; r < n; ++r) {
    rows[r] = src.data + static_cast<size_t>(y0 + r) * src.row_stride + c * src.channel_stride;
  }
  if (n < kBlock) std::memset(t, 0, size_t{src.width} * kBlock);
  const size_t step = src.pixel_stride;
  for (uint32_t x = 0; x < src.width; ++x) {
    uint8_t* col = t + size_t{x} * kBlock;
    for (int r = 0; r < n; ++r) col[r] = rows[r][x * step];
  }
}

// One block's outputs: out[r * out_row + xx] for the block's first n rows.
SLUICE_AVX2_DISPATCH(void, HorizontalBlock,
                     (const uint8_t* __restrict t, const int* __restrict bounds,
                      const int32_t* __restrict weights, int ksize, uint32_t out_w, int n,
                      uint8_t* __restrict out, size_t out_row),
                     (t, bounds, weights, ksize, out_w, n, out, out_row)) {
  for (uint32_t xx = 0; xx < out_w; ++xx) {
    const int xmin = bounds[size_t{xx} * 2];
    const int xmax = bounds[size_t{xx} * 2 + 1];
    const int32_t* k = weights + size_t{xx} * ksize;
    const uint8_t* col = t + static_cast<size_t>(xmin) * kBlock;
    int32_t acc[kBlock];
    for (int r = 0; r < kBlock; ++r) acc[r] = 1 << (kPrecisionBits - 1);
    for (int x = 0; x < xmax; ++x) {
      const int32_t w = k[x];
      const uint8_t* v = col + static_cast<size_t>(x) * kBlock;
      for (int r = 0; r < kBlock; ++r) acc[r] += static_cast<int32_t>(v[r]) * w;
    }
    uint8_t clipped[kBlock];
    for (int r = 0; r < kBlock; ++r) {  // Clip8: the shift, clamped to [0, 255]
      clipped[r] = static_cast<uint8_t>(std::clamp(acc[r] >> kPrecisionBits, 0, 255));
    }
    for (int r = 0; r < n; ++r) out[r * out_row + xx] = clipped[r];
  }
}

}  // namespace

void PilResample(const U8ImageView& src, uint32_t out_h, uint32_t out_w, PilFilter filter,
                 bool mirror, uint8_t* dst) {
  thread_local Scratch s;
  const size_t plane = size_t{out_h} * out_w;
  const auto put = [&](uint32_t c, uint32_t y, uint32_t x, uint8_t v) {
    dst[c * plane + size_t{y} * out_w + (mirror ? out_w - 1 - x : x)] = v;
  };
  const bool need_horizontal = out_w != src.width;
  const bool need_vertical = out_h != src.height;
  if (!need_horizontal && !need_vertical) {  // PIL copies the image
    for (uint32_t c = 0; c < src.channels; ++c) {
      for (uint32_t y = 0; y < out_h; ++y) {
        const uint8_t* row = src.data + y * src.row_stride + c * src.channel_stride;
        for (uint32_t x = 0; x < out_w; ++x) put(c, y, x, row[x * src.pixel_stride]);
      }
    }
    return;
  }
  ComputeTaps(static_cast<int>(src.width), static_cast<int>(out_w), filter, &s.horizontal);
  ComputeTaps(static_cast<int>(src.height), static_cast<int>(out_h), filter, &s.vertical);
  const Taps& th = s.horizontal;
  Taps& tv = s.vertical;
  // The rows the vertical pass reads: only those are resampled horizontally.
  const int first_row = tv.bounds[0];
  const int last_row = tv.bounds[size_t{out_h} * 2 - 2] + tv.bounds[size_t{out_h} * 2 - 1];

  // Vertical input: the horizontal pass's rows (first_row on), or the source itself.
  const uint8_t* vin = src.data;
  size_t vin_row = src.row_stride, vin_pixel = src.pixel_stride, vin_channel = src.channel_stride;
  if (need_horizontal) {
    const int rows = last_row - first_row;
    uint8_t* out = nullptr;
    size_t out_row = out_w, out_channel = size_t{static_cast<uint32_t>(rows)} * out_w;
    if (need_vertical) {
      s.rows.resize(size_t{src.channels} * static_cast<size_t>(rows) * out_w);
      out = s.rows.data();
      for (uint32_t yy = 0; yy < out_h; ++yy) tv.bounds[size_t{yy} * 2] -= first_row;
    }
    if (out != nullptr) {  // into the intermediate: blocks of rows at a time
      s.block.resize(size_t{src.width} * kBlock);
      for (uint32_t c = 0; c < src.channels; ++c) {
        for (int y0 = 0; y0 < rows; y0 += kBlock) {
          const int n = std::min(kBlock, rows - y0);
          TransposeBlock(src, c, first_row + y0, n, s.block.data());
          HorizontalBlock(s.block.data(), th.bounds.data(), th.weights.data(), th.ksize, out_w, n,
                          out + c * out_channel + static_cast<size_t>(y0) * out_row, out_row);
        }
      }
    }
    for (uint32_t c = 0; c < src.channels && out == nullptr; ++c) {  // straight to dst
      for (int yy = 0; yy < rows; ++yy) {
        const uint8_t* row = src.data + static_cast<size_t>(yy + first_row) * src.row_stride +
                             c * src.channel_stride;
        for (uint32_t xx = 0; xx < out_w; ++xx) {
          const int xmin = th.bounds[size_t{xx} * 2];
          const int xmax = th.bounds[size_t{xx} * 2 + 1];
          const int32_t* k = &th.weights[size_t{xx} * th.ksize];
          int32_t ss = 1 << (kPrecisionBits - 1);
          for (int x = 0; x < xmax; ++x) {
            ss +=
                static_cast<int32_t>(row[static_cast<size_t>(x + xmin) * src.pixel_stride]) * k[x];
          }
          put(c, static_cast<uint32_t>(yy), xx, Clip8(ss));
        }
      }
    }
    if (!need_vertical) return;
    vin = s.rows.data();
    vin_row = out_row;
    vin_pixel = 1;
    vin_channel = out_channel;
  }
  // Row by row: each tap's input row is added to the output row's sums, contiguous values the
  // compiler vectorizes (integer sums: the same bits in any order).
  s.sums.resize(out_w);
  int32_t* sums = s.sums.data();
  for (uint32_t c = 0; c < src.channels; ++c) {
    const uint8_t* in = vin + c * vin_channel;
    for (uint32_t yy = 0; yy < out_h; ++yy) {
      const int ymin = tv.bounds[size_t{yy} * 2];
      const int ymax = tv.bounds[size_t{yy} * 2 + 1];
      const int32_t* k = &tv.weights[size_t{yy} * tv.ksize];
      std::fill(sums, sums + out_w, 1 << (kPrecisionBits - 1));
      for (int y = 0; y < ymax; ++y) {
        const uint8_t* row = in + static_cast<size_t>(y + ymin) * vin_row;
        const int32_t w = k[y];
        if (vin_pixel == 1) {
          for (uint32_t xx = 0; xx < out_w; ++xx) sums[xx] += static_cast<int32_t>(row[xx]) * w;
        } else {
          for (uint32_t xx = 0; xx < out_w; ++xx) {
            sums[xx] += static_cast<int32_t>(row[xx * vin_pixel]) * w;
          }
        }
      }
      uint8_t* o = dst + c * plane + size_t{yy} * out_w;
      if (mirror) {
        for (uint32_t xx = 0; xx < out_w; ++xx) o[out_w - 1 - xx] = Clip8(sums[xx]);
      } else {
        for (uint32_t xx = 0; xx < out_w; ++xx) o[xx] = Clip8(sums[xx]);
      }
    }
  }
}

}  // namespace sluice::transforms_internal
