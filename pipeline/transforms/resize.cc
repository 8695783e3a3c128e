#include "pipeline/transforms/resize.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/bilinear.h"
#include "pipeline/transforms/internal/op_checks.h"
#include "pipeline/transforms/internal/pil_resample.h"

namespace sluice {
namespace {
// max_size: an int, or None (absent).
absl::StatusOr<uint32_t> MaxSizeArg(const TransformArgs& args) {
  if (!args.Has("max_size")) return 0;
  absl::StatusOr<std::string> name = args.Name("max_size", std::nullopt);
  if (name.ok() && *name == "None") return 0;
  ASSIGN_OR_RETURN(const int64_t v, args.Int("max_size", std::nullopt));
  if (v < 1 || v > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where("max_size"), ": expected None or a positive int, got ", v));
  }
  return static_cast<uint32_t>(v);
}

// torchvision's _compute_resized_output_size for a smaller-edge size.
void SmallerEdgeSize(uint32_t h, uint32_t w, uint32_t edge, uint32_t max_size, int64_t& out_h,
                     int64_t& out_w) {
  const uint32_t shorter = std::min(h, w), longer = std::max(h, w);
  int64_t new_short = edge;
  // int(requested * long / short): a correctly rounded division, then truncation.
  auto new_long = static_cast<int64_t>(static_cast<double>(uint64_t{edge} * longer) / shorter);
  if (max_size != 0 && new_long > max_size) {
    new_short = static_cast<int64_t>(static_cast<double>(uint64_t{max_size} * new_short) /
                                     static_cast<double>(new_long));
    new_long = max_size;
  }
  out_w = w <= h ? new_short : new_long;
  out_h = w <= h ? new_long : new_short;
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> Resize::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> size, args.Ints("size", {1, 2}, std::nullopt));
  for (int64_t v : size) {
    if (v < 1 || v > UINT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.Where("size"), ": expected a positive size, got ", v));
    }
  }
  ASSIGN_OR_RETURN(const transforms_internal::ResizeMode mode,
                   transforms_internal::ResizeModeArg(args));
  ASSIGN_OR_RETURN(const uint32_t max_size, MaxSizeArg(args));
  if (size.size() == 2) {
    if (max_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          args.Where("max_size"), ": expected None when size is (h, w), as torchvision does"));
    }
    return std::unique_ptr<Transform>(Exact(static_cast<uint32_t>(size[0]),
                                            static_cast<uint32_t>(size[1]), mode.antialias,
                                            mode.filter));
  }
  absl::StatusOr<std::unique_ptr<Resize>> op =
      SmallerEdge(static_cast<uint32_t>(size[0]), max_size, mode.antialias, mode.filter);
  if (!op.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where("max_size"), ": ", op.status().message()));
  }
  return std::unique_ptr<Transform>(std::move(*op));
}

std::unique_ptr<Resize> Resize::Exact(uint32_t height, uint32_t width, bool antialias,
                                      transforms_internal::PilFilter filter) {
  return std::unique_ptr<Resize>(new Resize(height, width, false, 0, antialias, filter));
}

absl::StatusOr<std::unique_ptr<Resize>> Resize::SmallerEdge(uint32_t smaller_edge,
                                                            uint32_t max_size, bool antialias,
                                                            transforms_internal::PilFilter filter) {
  if (smaller_edge == 0) return absl::InvalidArgumentError("expected a positive size");
  if (max_size != 0 && max_size <= smaller_edge) {
    return absl::InvalidArgumentError(absl::StrCat("max_size = ", max_size,
                                                   " must be greater than the smaller edge's "
                                                   "size ",
                                                   smaller_edge));
  }
  return std::unique_ptr<Resize>(
      new Resize(smaller_edge, smaller_edge, true, max_size, antialias, filter));
}

std::string Resize::Identity() const {
  const std::string size =
      smaller_edge_ ? absl::StrCat(height_) : transforms_internal::SizeText(height_, width_);
  const std::string max_size = max_size_ == 0 ? "None" : absl::StrCat(max_size_);
  return absl::StrCat(
      kName, "(size=", size, ", interpolation=", transforms_internal::InterpolationName(filter_),
      ", max_size=", max_size, antialias_ ? ", antialias=True)" : ", antialias=False)");
}

absl::StatusOr<SampleSpec> Resize::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (antialias_) RETURN_IF_ERROR(transforms_internal::CheckU8ForAntialias(kName, in));
  SampleSpec out = in;
  if (!smaller_edge_) {
    out.height = height_;
    out.width = width_;
    out.extent = SampleExtent::kFixed;
    return out;
  }
  if (!in.fixed()) {
    // Any one sample's sides stay within this bound unless its aspect ratio exceeds
    // bound / size; such a sample still fits when its bytes do (ApplyVariable checks). At
    // least twice the size: images smaller than it are upscaled, and their long side then
    // passes the size (a 15x17 photo under Resize(256) becomes 256x290; with a bound of
    // max(size, their sides) every such image of a split of small images was refused).
    const uint32_t side =
        max_size_ != 0
            ? max_size_
            : static_cast<uint32_t>(std::min<uint64_t>(
                  UINT32_MAX, std::max<uint64_t>({uint64_t{2} * height_, in.height, in.width})));
    out.height = out.width = side;
    out.max_pixels = 0;  // resizing changes the area: the input's area bound does not hold
    return out;
  }
  if (in.height == 0 || in.width == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Resize: expected a non-empty image, got ", SampleSpecString(in)));
  }
  int64_t h = 0, w = 0;
  SmallerEdgeSize(in.height, in.width, height_, max_size_, h, w);
  if (h < 1 || w < 1 || h > UINT32_MAX || w > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("Resize: ", in.height, "x", in.width,
                                                   " resizes to ", h, "x", w,
                                                   " (height x width); expected a positive size"));
  }
  out.height = static_cast<uint32_t>(h);
  out.width = static_cast<uint32_t>(w);
  return out;
}

void Resize::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom&) const {
  const SampleSpec out = *OutputSpec(in);
  if (out.height == in.height && out.width == in.width) {
    std::memcpy(dst, src, in.bytes());  // torchvision returns the image unchanged
    return;
  }
  if (antialias_) {
    const transforms_internal::U8ImageView view{static_cast<const uint8_t*>(src),
                                                in.width,
                                                1,
                                                size_t{in.height} * in.width,
                                                in.channels,
                                                in.height,
                                                in.width};
    transforms_internal::PilResample(view, out.height, out.width, filter_, false,
                                     static_cast<uint8_t*>(dst));
    return;
  }
  transforms_internal::ResizeBilinear(in, src, 0, 0, in.height, in.width, out.height, out.width,
                                      dst);
}

}  // namespace sluice
