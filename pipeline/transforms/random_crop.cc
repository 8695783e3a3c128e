#include "pipeline/transforms/random_crop.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/elements.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice {
using transforms_internal::PaddedAxis;
using transforms_internal::PaddingMode;

absl::StatusOr<std::unique_ptr<Transform>> RandomCrop::FromArgs(const TransformArgs& args) {
  RandomCropOptions o;
  ASSIGN_OR_RETURN(const transforms_internal::CropSize size, transforms_internal::SizeArg(args));
  o.height = size.height;
  o.width = size.width;
  ASSIGN_OR_RETURN(const transforms_internal::PaddingSides sides,
                   transforms_internal::PaddingArg(args, std::vector<int64_t>{0}));
  o.pad_left = sides.left;
  o.pad_top = sides.top;
  o.pad_right = sides.right;
  o.pad_bottom = sides.bottom;
  ASSIGN_OR_RETURN(o.pad_if_needed, args.Bool("pad_if_needed", false));
  ASSIGN_OR_RETURN(o.fill, args.Number("fill", 0.0));
  ASSIGN_OR_RETURN(o.padding_mode, transforms_internal::PaddingModeArg(args));
  ASSIGN_OR_RETURN(std::unique_ptr<RandomCrop> op, Create(o));
  return op;
}

absl::StatusOr<std::unique_ptr<RandomCrop>> RandomCrop::Create(const RandomCropOptions& o) {
  if (o.height == 0 || o.width == 0) {
    return absl::InvalidArgumentError("RandomCrop: expected a positive size");
  }
  if (!std::isfinite(o.fill)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RandomCrop: expected a finite fill, got ", o.fill));
  }
  return std::unique_ptr<RandomCrop>(new RandomCrop(o));
}

std::string RandomCrop::Identity() const {
  return absl::StrCat(
      kName, "(size=", transforms_internal::SizeText(o_.height, o_.width), ", padding=(",
      o_.pad_left, ", ", o_.pad_top, ", ", o_.pad_right, ", ", o_.pad_bottom,
      "), pad_if_needed=", o_.pad_if_needed ? "True" : "False", ", fill=", FormatDouble(o_.fill),
      ", padding_mode=", transforms_internal::PaddingModeName(o_.padding_mode), ")");
}

void RandomCrop::PaddedAxes(const SampleSpec& in, PaddedAxis& rows, PaddedAxis& cols) const {
  rows = PaddedAxis{in.height, {o_.pad_top, 0}, {o_.pad_bottom, 0}};
  cols = PaddedAxis{in.width, {o_.pad_left, 0}, {o_.pad_right, 0}};
  // torchvision pads a side shorter than the crop by (crop - side) on both ends.
  if (o_.pad_if_needed && cols.padded_size() < o_.width) {
    cols.before[1] = cols.after[1] = o_.width - cols.padded_size();
  }
  if (o_.pad_if_needed && rows.padded_size() < o_.height) {
    rows.before[1] = rows.after[1] = o_.height - rows.padded_size();
  }
}

std::string RandomCrop::EvalForm() const {
  return absl::StrCat("CenterCrop(size=", transforms_internal::SizeText(o_.height, o_.width), ")");
}

absl::StatusOr<SampleSpec> RandomCrop::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(transforms_internal::CheckChannelsFirst(kName, in));
  if (!in.fixed()) {
    return absl::InvalidArgumentError(
        "RandomCrop: expected one size for every sample, got sizes that vary; put Resize((h, "
        "w)), RandomResizedCrop(size) or CenterCrop(size) before it");
  }
  if (in.dtype == ElementType::kU8 &&
      (o_.fill != std::floor(o_.fill) || o_.fill < 0 || o_.fill > 255)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RandomCrop: u8 samples need a fill that is an integer in [0, 255], got ",
                     FormatDouble(o_.fill)));
  }
  PaddedAxis rows, cols;
  PaddedAxes(in, rows, cols);
  for (const auto& [axis, name] : {std::pair{rows, "height"}, std::pair{cols, "width"}}) {
    absl::Status s = axis.Check(o_.padding_mode, name);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("RandomCrop: ", s.message()));
  }
  if (rows.padded_size() < o_.height || cols.padded_size() < o_.width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RandomCrop: crop ", o_.height, "x", o_.width, " is larger than the padded image ",
        rows.padded_size(), "x", cols.padded_size(), " (", in.height, "x", in.width, " padded by (",
        o_.pad_left, ", ", o_.pad_top, ", ", o_.pad_right, ", ", o_.pad_bottom,
        ")); expected a size of at most that, or pad_if_needed=True"));
  }
  SampleSpec out = in;
  out.height = o_.height;
  out.width = o_.width;
  return out;
}

std::string RandomCrop::Draws(const SampleSpec& in, SampleRandom& rng) const {
  PaddedAxis rows, cols;
  PaddedAxes(in, rows, cols);
  const uint64_t top = rng.UniformInt(0, rows.padded_size() - o_.height);
  const uint64_t left = rng.UniformInt(0, cols.padded_size() - o_.width);
  return absl::StrCat("{\"top\": ", top, ", \"left\": ", left, "}");  // in the padded image
}

void RandomCrop::Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const {
  PaddedAxis rows, cols;
  PaddedAxes(in, rows, cols);
  const auto top = static_cast<int64_t>(rng.UniformInt(0, rows.padded_size() - o_.height));
  const auto left = static_cast<int64_t>(rng.UniformInt(0, cols.padded_size() - o_.width));
  alignas(4) char fill[4];
  transforms_internal::StoreFromFloat(in.dtype, static_cast<float>(o_.fill), fill);
  transforms_internal::CopyPaddedWindow(in, src, rows, cols, o_.padding_mode, fill, top, left,
                                        o_.height, o_.width, dst);
}

}  // namespace sluice
