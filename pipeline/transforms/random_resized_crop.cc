#include "pipeline/transforms/random_resized_crop.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/bilinear.h"
#include "pipeline/transforms/internal/op_checks.h"
#include "pipeline/transforms/internal/pil_resample.h"

namespace sluice {
namespace {
// A pair (lo, hi) of positive numbers with lo <= hi, or `fallback` when absent.
absl::Status RangeArg(const TransformArgs& args, absl::string_view name, double fallback_lo,
                      double fallback_hi, double out[2]) {
  out[0] = fallback_lo;
  out[1] = fallback_hi;
  if (!args.Has(name)) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<double> v, args.Numbers(name));
  if (v.size() != 2 || !(v[0] > 0) || !(v[0] <= v[1]) || !std::isfinite(v[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where(name), ": expected (lo, hi) with 0 < lo <= hi, both finite"));
  }
  out[0] = v[0];
  out[1] = v[1];
  return absl::OkStatus();
}

// Python's round(): halves to even (the default rounding mode of nearbyint).
int64_t RoundHalfEven(double v) { return static_cast<int64_t>(std::nearbyint(v)); }
}  // namespace

RandomResizedCrop::RandomResizedCrop(uint32_t height, uint32_t width, const double scale[2],
                                     const double ratio[2], bool antialias,
                                     transforms_internal::PilFilter filter)
    : height_(height),
      width_(width),
      scale_{scale[0], scale[1]},
      ratio_{ratio[0], ratio[1]},
      antialias_(antialias),
      filter_(filter) {}

absl::StatusOr<std::unique_ptr<Transform>> RandomResizedCrop::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const transforms_internal::CropSize size, transforms_internal::SizeArg(args));
  double scale[2], ratio[2];
  RETURN_IF_ERROR(RangeArg(args, "scale", 0.08, 1.0, scale));
  RETURN_IF_ERROR(RangeArg(args, "ratio", 3.0 / 4.0, 4.0 / 3.0, ratio));
  ASSIGN_OR_RETURN(const transforms_internal::ResizeMode mode,
                   transforms_internal::ResizeModeArg(args));
  ASSIGN_OR_RETURN(std::unique_ptr<RandomResizedCrop> op,
                   Create(size.height, size.width, scale, ratio, mode.antialias, mode.filter));
  return op;
}

absl::StatusOr<std::unique_ptr<RandomResizedCrop>> RandomResizedCrop::Create(
    uint32_t height, uint32_t width, const double scale[2], const double ratio[2], bool antialias,
    transforms_internal::PilFilter filter) {
  if (height == 0 || width == 0) {
    return absl::InvalidArgumentError("RandomResizedCrop: expected a positive size");
  }
  for (const double* range : {scale, ratio}) {
    if (!(range[0] > 0) || !(range[0] <= range[1]) || !std::isfinite(range[1])) {
      return absl::InvalidArgumentError(
          "RandomResizedCrop: expected scale and ratio of (lo, hi) with 0 < lo <= hi");
    }
  }
  return std::unique_ptr<RandomResizedCrop>(
      new RandomResizedCrop(height, width, scale, ratio, antialias, filter));
}

CropWindow RandomResizedCrop::Window(uint32_t height, uint32_t width, SampleRandom& rng) const {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio_[0]), log_hi = std::log(ratio_[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * (scale_[0] + (scale_[1] - scale_[0]) * rng.UniformDouble());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.UniformDouble());
    const int64_t w = RoundHalfEven(std::sqrt(target_area * aspect));
    const int64_t h = RoundHalfEven(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      CropWindow win{0, 0, static_cast<uint32_t>(h), static_cast<uint32_t>(w)};
      win.top = static_cast<uint32_t>(rng.UniformInt(0, height - win.height));
      win.left = static_cast<uint32_t>(rng.UniformInt(0, width - win.width));
      return win;
    }
  }
  // torchvision's fallback: the central crop, cut to the nearer end of `ratio`.
  const double in_ratio = static_cast<double>(width) / height;
  int64_t w = width, h = height;
  if (in_ratio < ratio_[0]) {
    h = RoundHalfEven(w / ratio_[0]);
  } else if (in_ratio > ratio_[1]) {
    w = RoundHalfEven(h * ratio_[1]);
  }
  // A window of 0 (an image far narrower than ratio allows) keeps one row or column: the
  // bilinear resize needs a source pixel, where torch would fail on an empty tensor.
  h = std::clamp<int64_t>(h, 1, height);
  w = std::clamp<int64_t>(w, 1, width);
  return CropWindow{static_cast<uint32_t>((height - h) / 2), static_cast<uint32_t>((width - w) / 2),
                    static_cast<uint32_t>(h), static_cast<uint32_t>(w)};
}

std::string RandomResizedCrop::Identity() const {
  return absl::StrCat(kName, "(size=", transforms_internal::SizeText(height_, width_), ", scale=(",
                      FormatDouble(scale_[0]), ", ", FormatDouble(scale_[1]), "), ratio=(",
                      FormatDouble(ratio_[0]), ", ", FormatDouble(ratio_[1]),
                      "), interpolation=", transforms_internal::InterpolationName(filter_),
                      ", antialias=", antialias_ ? "True)" : "False)");
}

std::string RandomResizedCrop::EvalForm() const {
  // torchvision's reference recipes: crop 224 of a resize to 256, 224 / 0.875 (exact in binary).
  const uint32_t side = static_cast<uint32_t>(std::floor(std::max(height_, width_) / 0.875));
  return absl::StrCat("Resize(size=", side,
                      ", interpolation=", transforms_internal::InterpolationName(filter_),
                      ", antialias=", antialias_ ? "True" : "False",
                      "), CenterCrop(size=", transforms_internal::SizeText(height_, width_), ")");
}

absl::StatusOr<SampleSpec> RandomResizedCrop::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (antialias_) RETURN_IF_ERROR(transforms_internal::CheckU8ForAntialias(kName, in));
  if (in.height == 0 || in.width == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RandomResizedCrop: expected a non-empty image, got ", SampleSpecString(in)));
  }
  SampleSpec out = in;
  out.height = height_;
  out.width = width_;
  out.extent = SampleExtent::kFixed;
  return out;
}

std::string RandomResizedCrop::Draws(const SampleSpec& in, SampleRandom& rng) const {
  const CropWindow win = Window(in.height, in.width, rng);
  return absl::StrCat("{\"top\": ", win.top, ", \"left\": ", win.left, ", \"height\": ", win.height,
                      ", \"width\": ", win.width, "}");
}

void RandomResizedCrop::Apply(const SampleSpec& in, const void* src, void* dst,
                              SampleRandom& rng) const {
  const CropWindow win = Window(in.height, in.width, rng);
  if (antialias_) {
    const size_t plane = size_t{in.height} * in.width;
    const transforms_internal::U8ImageView view{
        static_cast<const uint8_t*>(src) + size_t{win.top} * in.width + win.left,
        in.width,
        1,
        plane,
        in.channels,
        win.height,
        win.width};
    transforms_internal::PilResample(view, height_, width_, filter_, false,
                                     static_cast<uint8_t*>(dst));
    return;
  }
  transforms_internal::ResizeBilinear(in, src, win.top, win.left, win.height, win.width, height_,
                                      width_, dst);
}

void RandomResizedCrop::PilResize(const transforms_internal::InterleavedU8Image& image,
                                  uint32_t channels, const CropWindow& win, bool mirror,
                                  uint8_t* dst) const {
  // A grey image gives its one plane to every channel asked for (channel stride 0).
  const transforms_internal::U8ImageView view{
      image.pixels + win.top * image.row_bytes + size_t{win.left} * image.pixel_bytes,
      image.row_bytes,
      image.pixel_bytes,
      image.pixel_bytes >= 3 ? size_t{1} : size_t{0},
      channels,
      win.height,
      win.width};
  transforms_internal::PilResample(view, height_, width_, filter_, mirror, dst);
}

void RandomResizedCrop::ApplyInterleaved(const transforms_internal::InterleavedU8Image& image,
                                         uint32_t channels, bool mirror, SampleRandom& rng,
                                         uint8_t* dst) const {
  const CropWindow win = Window(image.height, image.width, rng);
  if (antialias_) return PilResize(image, channels, win, mirror, dst);
  transforms_internal::ResizeInterleavedU8(image, channels, win.top, win.left, win.height,
                                           win.width, height_, width_, mirror, dst);
}

void RandomResizedCrop::ResizeWindow(const transforms_internal::InterleavedU8Image& window,
                                     uint32_t channels, bool mirror, uint8_t* dst) const {
  if (antialias_) {
    return PilResize(window, channels, CropWindow{0, 0, window.height, window.width}, mirror, dst);
  }
  transforms_internal::ResizeInterleavedU8(window, channels, 0, 0, window.height, window.width,
                                           height_, width_, mirror, dst);
}

}  // namespace sluice
