#include "pipeline/transforms/random_rotation.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice {
namespace ti = transforms_internal;

absl::StatusOr<std::unique_ptr<Transform>> RandomRotation::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(ti::AffineCommonArgs common, ti::ParseAffineCommonArgs(args));
  ASSIGN_OR_RETURN(const bool expand, args.Bool("expand", false));
  if (expand) {
    return absl::InvalidArgumentError(absl::StrCat(
        args.Where("expand"),
        ": expected False; expand=True makes the output size depend on each sample's angle, and "
        "a chain's output size is fixed (rotate without expand, or follow a Resize)"));
  }
  return std::unique_ptr<Transform>(new RandomRotation(std::move(common)));
}

std::string RandomRotation::Identity() const {
  return absl::StrCat(
      kName, "(degrees=[", FormatDouble(args_.degrees[0]), ", ", FormatDouble(args_.degrees[1]),
      "], interpolation=", ti::InterpolationText(args_.interpolation),
      ", expand=False, center=", ti::CenterText(args_.center), ", fill=", ti::FillText(args_.fill),
      ", pil=", args_.pil ? "True" : "False", ")");
}

absl::StatusOr<SampleSpec> RandomRotation::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(ti::CheckAffineInput(kName, in, args_));
  return in;
}

float RandomRotation::Draw(SampleRandom& rng) const {
  return ti::UniformFloat(rng, args_.degrees[0], args_.degrees[1]);
}

std::string RandomRotation::Draws(const SampleSpec& in, SampleRandom& rng) const {
  return absl::StrCat("{\"angle\": ", FormatDouble(Draw(rng)), "}");
}

void RandomRotation::Apply(const SampleSpec& in, const void* src, void* dst,
                           SampleRandom& rng) const {
  const double angle = Draw(rng);
  if (args_.pil) {
    ti::PilRotate(in, src, dst, angle, args_.center, args_.interpolation, args_.fill);
    return;
  }
  // F.rotate: the center relative to the image's centre, and the matrix of -angle.
  std::array<double, 2> center = {0.0, 0.0};
  if (args_.center) {
    center = {(*args_.center)[0] - in.width * 0.5, (*args_.center)[1] - in.height * 0.5};
  }
  const std::array<double, 6> matrix =
      ti::InverseAffineMatrix(center, -angle, {0.0, 0.0}, 1.0, {0.0, 0.0});
  ti::TensorAffine(in, src, dst, matrix, args_.interpolation, args_.fill);
}

}  // namespace sluice
