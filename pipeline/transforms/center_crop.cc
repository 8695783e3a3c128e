#include "pipeline/transforms/center_crop.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"
#include "pipeline/transforms/internal/padded_window.h"

namespace sluice {
namespace {
using transforms_internal::PaddedAxis;

// One axis of F.center_crop: zero padding when the crop is longer than the side, and the
// crop's offset in the (padded) axis.
PaddedAxis CenterAxis(uint32_t side, uint32_t crop, int64_t& offset) {
  PaddedAxis axis{side, {0, 0}, {0, 0}};
  offset = 0;
  if (crop > side) {
    axis.before[0] = (crop - side) / 2;
    axis.after[0] = (crop - side + 1) / 2;
  } else {
    // int(round(margin / 2.0)): Python rounds a half to the even neighbour.
    const int64_t margin = side - crop;
    offset = margin / 2 + ((margin % 2 == 1 && (margin / 2) % 2 == 1) ? 1 : 0);
  }
  return axis;
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> CenterCrop::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const transforms_internal::CropSize size, transforms_internal::SizeArg(args));
  return std::make_unique<CenterCrop>(size.height, size.width);
}

std::string CenterCrop::Identity() const {
  return absl::StrCat(kName, "(size=", transforms_internal::SizeText(height_, width_), ")");
}

absl::StatusOr<SampleSpec> CenterCrop::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  SampleSpec out = in;
  out.height = height_;
  out.width = width_;
  out.extent = SampleExtent::kFixed;  // every size crops (or pads) to the same one
  return out;
}

void CenterCrop::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom&) const {
  int64_t top = 0, left = 0;
  const PaddedAxis rows = CenterAxis(in.height, height_, top);
  const PaddedAxis cols = CenterAxis(in.width, width_, left);
  const char zero[4] = {0, 0, 0, 0};  // 0 in every element type
  transforms_internal::CopyPaddedWindow(in, src, rows, cols,
                                        transforms_internal::PaddingMode::kConstant, zero, top,
                                        left, height_, width_, dst);
}

transforms_internal::PixelWindow CenterCrop::SourceWindow(uint32_t height, uint32_t width) const {
  int64_t top = 0, left = 0;
  CenterAxis(height, height_, top);
  CenterAxis(width, width_, left);
  return transforms_internal::PixelWindow{static_cast<uint32_t>(left), static_cast<uint32_t>(top),
                                          std::min(width, width_), std::min(height, height_)};
}

}  // namespace sluice
