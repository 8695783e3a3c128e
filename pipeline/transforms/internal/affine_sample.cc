#include "pipeline/transforms/internal/affine_sample.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice::transforms_internal {
namespace {

// CPython's math.radians: x * (pi / 180).
constexpr double kDegToRad = std::numbers::pi / 180.0;

// fmaf(a, b, c), correctly rounded without an FMA instruction: a * b is exact in double; the
// sum is rounded to odd (TwoSum's error sets the last bit), which then rounds to float32 as the
// exact value would.
inline float Fma32(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);
  const double dc = c;
  double s = p + dc;
  const double bb = s - p;
  const double err = (p - (s - bb)) + (dc - bb);
  if (err != 0) {
    uint64_t bits = std::bit_cast<uint64_t>(s);
    if ((bits & 1) == 0) {
      bits = ((err > 0) == (s > 0)) ? bits + 1 : bits - 1;
      s = std::bit_cast<double>(bits);
    }
  }
  return static_cast<float>(s);
}

// Python's float round(x, 15): the correctly rounded 15-decimal text read back.
double Round15(double x) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.15f", x);
  return std::strtod(text, nullptr);
}

// Python's float x % m for m > 0: in [0, m).
double PyMod(double x, double m) {
  double r = std::fmod(x, m);
  if (r != 0) {
    if (r < 0) r += m;
  } else {
    r = 0.0;
  }
  return r;
}

// Pillow's FLOOR: (int)floor(v) below 0, else (int)v.
inline int64_t PilFloor(double v) {
  return v < 0.0 ? static_cast<int64_t>(std::floor(v)) : static_cast<int64_t>(v);
}

// Whether Pillow's COORD(v) (-1 below 0, else (int)v) lands in [0, size).
inline bool PilCoordIn(double v, uint32_t size) { return v >= 0.0 && v < size; }

// The per-channel fill of a u8 PIL image: torchvision's _parse_fill truncates with int().
inline uint8_t PilFill(const std::vector<double>& fill, uint32_t c) {
  return static_cast<uint8_t>(static_cast<int>(fill[fill.size() == 1 ? 0 : c]));
}

template <typename T>
void TensorAffineTyped(const SampleSpec& in, const T* src, T* dst,
                       const std::array<double, 6>& matrix, AffineInterpolation mode,
                       const std::vector<double>& fill) {
  const uint32_t W = in.width, H = in.height, C = in.channels;
  const size_t plane = size_t{H} * W;
  // theta = torch.tensor(matrix, dtype=float32); rescaled = theta.T / [0.5 w, 0.5 h].
  float theta[6];
  for (int i = 0; i < 6; ++i) theta[i] = static_cast<float>(matrix[i]);
  const float half_w = static_cast<float>(0.5 * W), half_h = static_cast<float>(0.5 * H);
  const float rx[3] = {theta[0] / half_w, theta[1] / half_w, theta[2] / half_w};
  const float ry[3] = {theta[3] / half_h, theta[4] / half_h, theta[5] / half_h};
  // grid_sample's unnormalize (align_corners=False): (g + 1) * size / 2 - 0.5.
  const float scale_x = static_cast<float>(W) / 2, scale_y = static_cast<float>(H) / 2;
  const float fw = static_cast<float>(W), fh = static_cast<float>(H);
  constexpr bool kU8 = std::is_same_v<T, uint8_t>;
  auto fill_at = [&](uint32_t c) { return static_cast<float>(fill[fill.size() == 1 ? 0 : c]); };
  auto store = [](float v) -> T {
    if constexpr (kU8) {
      const float r = std::nearbyint(v);  // torch.round, then the cast
      return static_cast<uint8_t>(r <= 0.0f ? 0.0f : r >= 255.0f ? 255.0f : r);
    } else {
      return v;
    }
  };
  for (uint32_t i = 0; i < H; ++i) {
    // The base grid's pixel centres: linspace(-h/2 + 0.5, h/2 - 0.5), exact.
    const float by = static_cast<float>(i) - 0.5f * static_cast<float>(H) + 0.5f;
    for (uint32_t j = 0; j < W; ++j) {
      const float bx = static_cast<float>(j) - 0.5f * static_cast<float>(W) + 0.5f;
      // base @ rescaled (torch's bmm rounds bx * r0, fuses by * r1 into it, then adds r2).
      const float gx = Fma32(by, rx[1], bx * rx[0]) + rx[2];
      const float gy = Fma32(by, ry[1], bx * ry[0]) + ry[2];
      const float x = Fma32(gx + 1.0f, scale_x, -0.5f);
      const float y = Fma32(gy + 1.0f, scale_y, -0.5f);
      const size_t o = size_t{i} * W + j;
      if (mode == AffineInterpolation::kNearest) {
        const float xn = std::nearbyint(x), yn = std::nearbyint(y);
        if (xn > -1.0f && xn < fw && yn > -1.0f && yn < fh) {
          const size_t s = static_cast<size_t>(yn) * W + static_cast<size_t>(xn);
          for (uint32_t c = 0; c < C; ++c) dst[c * plane + o] = src[c * plane + s];
        } else {
          for (uint32_t c = 0; c < C; ++c) dst[c * plane + o] = store(fill_at(c));
        }
        continue;
      }
      const float xw = std::floor(x), yn = std::floor(y);
      const float w = x - xw, e = 1.0f - w, n = y - yn, s = 1.0f - n;
      const float nw = s * e, ne = s * w, sw = n * e, se = n * w;
      const bool w_in = xw > -1.0f && xw<fw, e_in = xw + 1.0f> - 1.0f && xw + 1.0f < fw;
      const bool n_in = yn > -1.0f && yn<fh, s_in = yn + 1.0f> - 1.0f && yn + 1.0f < fh;
      const bool in_nw = w_in && n_in, in_ne = e_in && n_in, in_sw = w_in && s_in,
                 in_se = e_in && s_in;
      // The mask channel torchvision appends: ones sampled the same way.
      const float mask = Fma32(in_se ? 1.0f : 0.0f, se,
                               Fma32(in_sw ? 1.0f : 0.0f, sw,
                                     Fma32(in_ne ? 1.0f : 0.0f, ne, (in_nw ? 1.0f : 0.0f) * nw)));
      const float keep = 1.0f - mask;
      const int64_t ix = in_nw || in_sw ? static_cast<int64_t>(xw) : 0;
      const int64_t iy = in_nw || in_ne ? static_cast<int64_t>(yn) : 0;
      const size_t base_n = in_nw || in_ne ? static_cast<size_t>(iy) * W : 0;
      const size_t base_s =
          in_sw || in_se ? static_cast<size_t>(static_cast<int64_t>(yn) + 1) * W : 0;
      const size_t col_w = in_nw || in_sw ? static_cast<size_t>(ix) : 0;
      const size_t col_e = in_ne || in_se ? static_cast<size_t>(static_cast<int64_t>(xw) + 1) : 0;
      for (uint32_t c = 0; c < C; ++c) {
        const T* p = src + c * plane;
        const float v_nw = in_nw ? static_cast<float>(p[base_n + col_w]) : 0.0f;
        const float v_ne = in_ne ? static_cast<float>(p[base_n + col_e]) : 0.0f;
        const float v_sw = in_sw ? static_cast<float>(p[base_s + col_w]) : 0.0f;
        const float v_se = in_se ? static_cast<float>(p[base_s + col_e]) : 0.0f;
        const float v = Fma32(v_se, se, Fma32(v_sw, sw, Fma32(v_ne, ne, v_nw * nw)));
        // img * mask + (1 - mask) * fill, each step rounded as torch's separate ops.
        const float kept = v * mask;
        const float filled = keep * fill_at(c);
        dst[c * plane + o] = store(kept + filled);
      }
    }
  }
}

// Pillow's nearest affine of a u8 image (ImagingTransformAffine with filter 0).
void PilNearest(const SampleSpec& in, const uint8_t* src, uint8_t* dst, const double a[6],
                const std::vector<double>& fill) {
  const uint32_t W = in.width, H = in.height, C = in.channels;
  const size_t plane = size_t{H} * W;
  auto put = [&](uint32_t y, uint32_t x, int64_t sy, int64_t sx) {
    const size_t o = size_t{y} * W + x, s = static_cast<size_t>(sy) * W + static_cast<size_t>(sx);
    for (uint32_t c = 0; c < C; ++c) dst[c * plane + o] = src[c * plane + s];
  };
  for (uint32_t c = 0; c < C; ++c) std::memset(dst + c * plane, PilFill(fill, c), plane);
  if (a[1] == 0 && a[3] == 0) {  // ImagingScaleAffine
    double yo = a[5] + a[4] * 0.5;
    for (uint32_t y = 0; y < H; ++y, yo += a[4]) {
      if (!PilCoordIn(yo, H)) continue;
      double xo = a[2] + a[0] * 0.5;
      for (uint32_t x = 0; x < W; ++x, xo += a[0]) {
        if (PilCoordIn(xo, W)) put(y, x, static_cast<int64_t>(yo), static_cast<int64_t>(xo));
      }
    }
    return;
  }
  auto fixed_ok = [&](double x, double y) {
    return std::fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 &&
           std::fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
  };
  if (fixed_ok(0, 0) && fixed_ok(W, H) && fixed_ok(0, H) && fixed_ok(W, 0)) {  // affine_fixed
    auto fix = [](double v) { return PilFloor(v * 65536.0 + 0.5); };
    const int64_t a0 = fix(a[0]), a1 = fix(a[1]), a3 = fix(a[3]), a4 = fix(a[4]);
    int64_t a2 = fix(a[2] + a[0] * 0.5 + a[1] * 0.5);
    int64_t a5 = fix(a[5] + a[3] * 0.5 + a[4] * 0.5);
    for (uint32_t y = 0; y < H; ++y, a2 += a1, a5 += a4) {
      int64_t xx = a2, yy = a5;
      for (uint32_t x = 0; x < W; ++x, xx += a0, yy += a3) {
        const int64_t xin = xx >> 16, yin = yy >> 16;
        if (xin >= 0 && xin < W && yin >= 0 && yin < H) put(y, x, yin, xin);
      }
    }
    return;
  }
  double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;  // the floating-point path
  double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
  for (uint32_t y = 0; y < H; ++y, xo += a[1], yo += a[4]) {
    double xx = xo, yy = yo;
    for (uint32_t x = 0; x < W; ++x, xx += a[0], yy += a[3]) {
      if (PilCoordIn(xx, W) && PilCoordIn(yy, H)) {
        put(y, x, static_cast<int64_t>(yy), static_cast<int64_t>(xx));
      }
    }
  }
}

// Pillow's bilinear affine of a u8 image (ImagingGenericTransform, bilinear_filter8/32RGB).
void PilBilinear(const SampleSpec& in, const uint8_t* src, uint8_t* dst, const double a[6],
                 const std::vector<double>& fill) {
  const uint32_t W = in.width, H = in.height, C = in.channels;
  const size_t plane = size_t{H} * W;
  auto clip = [](int64_t v, uint32_t size) -> int64_t {
    return v < 0 ? 0 : v < size ? v : int64_t{size} - 1;
  };
  for (uint32_t y = 0; y < H; ++y) {
    for (uint32_t x = 0; x < W; ++x) {
      const size_t o = size_t{y} * W + x;
      const double xin = x + 0.5, yin = y + 0.5;
      double xx = a[0] * xin + a[1] * yin + a[2];
      double yy = a[3] * xin + a[4] * yin + a[5];
      if (xx < 0.0 || xx >= W || yy < 0.0 || yy >= H) {
        for (uint32_t c = 0; c < C; ++c) dst[c * plane + o] = PilFill(fill, c);
        continue;
      }
      xx -= 0.5;
      yy -= 0.5;
      const int64_t ix = PilFloor(xx), iy = PilFloor(yy);
      const double dx = xx - ix, dy = yy - iy;
      const size_t x0 = clip(ix, W), x1 = clip(ix + 1, W);
      const size_t row0 = static_cast<size_t>(clip(iy, H)) * W;
      const bool has_row1 = iy + 1 >= 0 && iy + 1 < H;
      const size_t row1 = has_row1 ? static_cast<size_t>(iy + 1) * W : 0;
      for (uint32_t c = 0; c < C; ++c) {
        const uint8_t* p = src + c * plane;
        double v1 = p[row0 + x0] + (int{p[row0 + x1]} - int{p[row0 + x0]}) * dx;
        double v2 = v1;
        if (has_row1) v2 = p[row1 + x0] + (int{p[row1 + x1]} - int{p[row1 + x0]}) * dx;
        v1 = v1 + (v2 - v1) * dy;
        dst[c * plane + o] = static_cast<uint8_t>(v1);
      }
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<double>> AngleRangeArg(const TransformArgs& args, absl::string_view name,
                                                  std::vector<size_t> sizes) {
  const std::string expected =
      sizes.size() == 1 ? "a number >= 0 (the range (-v, v)) or a pair (lo, hi) with lo <= hi"
                        : "a number >= 0 (the x range (-v, v)), a pair (lo, hi) for x, or four "
                          "values (x lo, x hi, y lo, y hi), each lo <= hi";
  absl::StatusOr<std::vector<double>> v = args.Numbers(name);
  if (!v.ok()) return args.Wrong(name, expected);
  std::vector<double> out;
  if (v->size() == 1) {
    const double d = (*v)[0];
    if (!(d >= 0) || !std::isfinite(d)) return args.Wrong(name, expected);
    out = {-d, d};
  } else {
    bool size_ok = false;
    for (const size_t s : sizes) size_ok = size_ok || v->size() == s;
    if (!size_ok) return args.Wrong(name, expected);
    out = *v;
    for (size_t k = 0; k < out.size(); k += 2) {
      if (!std::isfinite(out[k]) || !std::isfinite(out[k + 1]) || !(out[k] <= out[k + 1])) {
        return args.Wrong(name, expected);
      }
    }
  }
  return out;
}

absl::StatusOr<AffineCommonArgs> ParseAffineCommonArgs(const TransformArgs& args) {
  AffineCommonArgs out;
  if (!args.Has("degrees")) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.op(), ": argument 'degrees' is required (a number or (lo, hi))"));
  }
  absl::StatusOr<std::vector<double>> degrees = AngleRangeArg(args, "degrees", {2});
  if (!degrees.ok()) return degrees.status();
  out.degrees = {(*degrees)[0], (*degrees)[1]};

  absl::StatusOr<std::string> mode = args.Name("interpolation", "nearest");
  if (!mode.ok()) return mode.status();
  const std::string lower = absl::AsciiStrToLower(*mode);
  const absl::string_view name = absl::StripPrefix(lower, "interpolationmode.");
  if (name == "nearest") {
    out.interpolation = AffineInterpolation::kNearest;
  } else if (name == "bilinear") {
    out.interpolation = AffineInterpolation::kBilinear;
  } else {
    return args.Wrong("interpolation", "nearest or bilinear (torchvision's modes on tensors)");
  }

  if (args.Has("center")) {
    absl::StatusOr<std::string> none = args.Name("center", std::nullopt);
    if (!none.ok() || *none != "None") {
      absl::StatusOr<std::vector<double>> c = args.Numbers("center");
      if (!c.ok() || c->size() != 2 || !std::isfinite((*c)[0]) || !std::isfinite((*c)[1])) {
        return args.Wrong("center", "None or (x, y) in pixels, the origin the upper left corner");
      }
      out.center = std::array<double, 2>{(*c)[0], (*c)[1]};
    }
  }

  if (args.Has("fill")) {
    absl::StatusOr<std::string> none = args.Name("fill", std::nullopt);
    if (!none.ok() || *none != "None") {  // torchvision takes None as 0
      absl::StatusOr<std::vector<double>> f = args.Numbers("fill");
      constexpr double kFloat32Max = FLT_MAX;
      bool ok = f.ok() && !f->empty();
      for (size_t k = 0; ok && k < f->size(); ++k) {
        ok = std::isfinite((*f)[k]) && std::fabs((*f)[k]) <= kFloat32Max;
      }
      if (!ok) {
        return args.Wrong("fill", "a number or a list of them (one, or one per channel), finite");
      }
      out.fill = *f;
    }
  }
  absl::StatusOr<bool> pil = args.Bool("pil", false);
  if (!pil.ok()) return pil.status();
  out.pil = *pil;
  return out;
}

std::string InterpolationText(AffineInterpolation mode) {
  return mode == AffineInterpolation::kNearest ? "nearest" : "bilinear";
}

std::string CenterText(const std::optional<std::array<double, 2>>& center) {
  if (!center) return "None";
  return absl::StrCat("[", FormatDouble((*center)[0]), ", ", FormatDouble((*center)[1]), "]");
}

std::string FillText(const std::vector<double>& fill) {
  if (fill.size() == 1) return FormatDouble(fill[0]);
  return absl::StrCat(
      "[",
      absl::StrJoin(fill, ", ", [](std::string* out, double v) { out->append(FormatDouble(v)); }),
      "]");
}

absl::Status CheckAffineInput(absl::string_view op, const SampleSpec& in,
                              const AffineCommonArgs& common) {
  absl::Status status = CheckChannelsFirst(op, in);
  if (!status.ok()) return status;
  if (in.dtype != ElementType::kU8 && in.dtype != ElementType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expected u8 or f32 samples, got ",
                                                   SampleSpecString(in),
                                                   "; put ToDtype(float32) before it"));
  }
  if (common.pil && (in.dtype != ElementType::kU8 || (in.channels != 1 && in.channels != 3))) {
    return absl::InvalidArgumentError(absl::StrCat(
        op,
        "(pil=True) samples as PIL does, on 8-bit images of 1 or 3 channels: expected u8 "
        "input of 1 or 3 channels, got ",
        SampleSpecString(in), " (put it before ToDtype and Normalize, as a PIL pipeline does)"));
  }
  if (common.fill.size() != 1 && common.fill.size() != in.channels) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " argument 'fill': expected one value, or one per channel (", in.channels,
                     "), got ", common.fill.size(), " values for ", SampleSpecString(in)));
  }
  if (in.dtype == ElementType::kU8) {
    for (const double v : common.fill) {
      if (!(v >= 0.0 && v <= 255.0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, " argument 'fill': expected values in [0, 255] for u8 samples, got ",
                         FormatDouble(v), " for ", SampleSpecString(in)));
      }
    }
  }
  return absl::OkStatus();
}

float UniformFloat(SampleRandom& rng, double lo, double hi) {
  return static_cast<float>(lo + (hi - lo) * rng.UniformDouble());
}

std::array<double, 6> InverseAffineMatrix(std::array<double, 2> center, double angle,
                                          std::array<double, 2> translate, double scale,
                                          std::array<double, 2> shear) {
  const double rot = angle * kDegToRad;
  const double sx = shear[0] * kDegToRad;
  const double sy = shear[1] * kDegToRad;
  const double cx = center[0], cy = center[1];
  const double tx = translate[0], ty = translate[1];
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  std::array<double, 6> m = {d, -b, 0.0, -c, a, 0.0};
  for (double& v : m) v = v / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  return m;
}

std::array<double, 6> PilRotateMatrix(double angle, std::array<double, 2> center) {
  const double r = -(angle * kDegToRad);
  std::array<double, 6> m = {Round15(std::cos(r)),  Round15(std::sin(r)), 0.0,
                             Round15(-std::sin(r)), Round15(std::cos(r)), 0.0};
  const double x = -center[0], y = -center[1];
  const double m2 = m[0] * x + m[1] * y + m[2];
  const double m5 = m[3] * x + m[4] * y + m[5];
  m[2] = m2 + center[0];
  m[5] = m5 + center[1];
  return m;
}

void TensorAffine(const SampleSpec& in, const void* src, void* dst,
                  const std::array<double, 6>& matrix, AffineInterpolation mode,
                  const std::vector<double>& fill) {
  if (in.dtype == ElementType::kU8) {
    TensorAffineTyped(in, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), matrix,
                      mode, fill);
  } else {
    TensorAffineTyped(in, static_cast<const float*>(src), static_cast<float*>(dst), matrix, mode,
                      fill);
  }
}

void PilAffine(const SampleSpec& in, const void* src, void* dst,
               const std::array<double, 6>& matrix, AffineInterpolation mode,
               const std::vector<double>& fill) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  if (mode == AffineInterpolation::kNearest) {
    PilNearest(in, s, d, matrix.data(), fill);
  } else {
    PilBilinear(in, s, d, matrix.data(), fill);
  }
}

void PilRotate(const SampleSpec& in, const void* src, void* dst, double angle,
               const std::optional<std::array<double, 2>>& center, AffineInterpolation mode,
               const std::vector<double>& fill) {
  angle = PyMod(angle, 360.0);
  const uint32_t W = in.width, H = in.height, C = in.channels;
  const size_t plane = size_t{H} * W;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  if (!center) {  // Image.rotate's transposes
    if (angle == 0) {
      std::memcpy(dst, src, in.bytes());
      return;
    }
    if (angle == 180 || ((angle == 90 || angle == 270) && W == H)) {
      for (uint32_t c = 0; c < C; ++c) {
        const uint8_t* p = s + c * plane;
        uint8_t* q = d + c * plane;
        for (uint32_t y = 0; y < H; ++y) {
          for (uint32_t x = 0; x < W; ++x) {
            if (angle == 180) {
              q[size_t{H - 1 - y} * W + (W - 1 - x)] = p[size_t{y} * W + x];
            } else if (angle == 90) {  // ROTATE_90: counter-clockwise
              q[size_t{W - 1 - x} * W + y] = p[size_t{y} * W + x];
            } else {  // ROTATE_270
              q[size_t{x} * W + (H - 1 - y)] = p[size_t{y} * W + x];
            }
          }
        }
      }
      return;
    }
  }
  const std::array<double, 2> c = center ? *center : std::array<double, 2>{W / 2.0, H / 2.0};
  PilAffine(in, src, dst, PilRotateMatrix(angle, c), mode, fill);
}

}  // namespace sluice::transforms_internal
