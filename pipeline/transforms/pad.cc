#include "pipeline/transforms/pad.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/elements.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {
using transforms_internal::PaddedAxis;
using transforms_internal::PaddingMode;

absl::StatusOr<std::unique_ptr<Transform>> Pad::FromArgs(const TransformArgs& args) {
  PadOptions o;
  ASSIGN_OR_RETURN(const transforms_internal::PaddingSides sides,
                   transforms_internal::PaddingArg(args, std::nullopt));
  o.left = sides.left;
  o.top = sides.top;
  o.right = sides.right;
  o.bottom = sides.bottom;
  ASSIGN_OR_RETURN(o.fill, args.Number("fill", 0.0));
  ASSIGN_OR_RETURN(o.mode, transforms_internal::PaddingModeArg(args));
  ASSIGN_OR_RETURN(std::unique_ptr<Pad> op, Create(o));
  return op;
}

absl::StatusOr<std::unique_ptr<Pad>> Pad::Create(const PadOptions& o) {
  if (!std::isfinite(o.fill)) {
    return absl::InvalidArgumentError(absl::StrCat("Pad: expected a finite fill, got ", o.fill));
  }
  return std::unique_ptr<Pad>(new Pad(o));
}

std::string Pad::Identity() const {
  return absl::StrCat(kName, "(padding=(", o_.left, ", ", o_.top, ", ", o_.right, ", ", o_.bottom,
                      "), fill=", FormatDouble(o_.fill),
                      ", padding_mode=", transforms_internal::PaddingModeName(o_.mode), ")");
}

absl::StatusOr<SampleSpec> Pad::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (in.dtype == ElementType::kU8 &&
      (o_.fill != std::floor(o_.fill) || o_.fill < 0 || o_.fill > 255)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Pad: u8 samples need a fill that is an integer in [0, 255], got ", FormatDouble(o_.fill)));
  }
  // A bound (sizes that vary) is checked per sample, when each one's size is known.
  if (in.fixed()) {
    const PaddedAxis rows{in.height, {o_.top, 0}, {o_.bottom, 0}};
    const PaddedAxis cols{in.width, {o_.left, 0}, {o_.right, 0}};
    for (const auto& [axis, name] : {std::pair{rows, "height"}, std::pair{cols, "width"}}) {
      absl::Status s = axis.Check(o_.mode, name);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("Pad: ", s.message()));
    }
  }
  const uint64_t height = uint64_t{in.height} + o_.top + o_.bottom;
  const uint64_t width = uint64_t{in.width} + o_.left + o_.right;
  if (height > UINT32_MAX || width > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("Pad: the padded image ", height, "x", width,
                                                   " is larger than any sample can be"));
  }
  SampleSpec out = in;
  out.height = static_cast<uint32_t>(height);
  out.width = static_cast<uint32_t>(width);
  if (!in.fixed() && in.max_pixels != 0) {
    // Any sample h x w within the bound (h <= H, w <= W, h w <= P) pads to at most
    // P + H (left + right) + (top + bottom) W + (top + bottom)(left + right) pixels.
    const uint64_t dh = uint64_t{o_.top} + o_.bottom, dw = uint64_t{o_.left} + o_.right;
    out.max_pixels = in.plane_values() + uint64_t{in.height} * dw + dh * in.width + dh * dw;
  }
  return out;
}

void Pad::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom&) const {
  const PaddedAxis rows{in.height, {o_.top, 0}, {o_.bottom, 0}};
  const PaddedAxis cols{in.width, {o_.left, 0}, {o_.right, 0}};
  alignas(4) char fill[4];
  transforms_internal::StoreFromFloat(in.dtype, static_cast<float>(o_.fill), fill);
  transforms_internal::CopyPaddedWindow(in, src, rows, cols, o_.mode, fill, 0, 0,
                                        static_cast<uint32_t>(rows.padded_size()),
                                        static_cast<uint32_t>(cols.padded_size()), dst);
}

}  // namespace sluice
