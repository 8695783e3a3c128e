#include "pipeline/transforms/random_affine.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace sluice {
namespace ti = transforms_internal;
namespace {
// Whether `name` is absent or None (torchvision's default of translate, scale and shear).
bool AbsentOrNone(const TransformArgs& args, absl::string_view name) {
  if (!args.Has(name)) return true;
  absl::StatusOr<std::string> none = args.Name(name, std::nullopt);
  return none.ok() && *none == "None";
}

// translate (a, b) in [0, 1] or scale (lo, hi) with 0 < lo <= hi.
absl::StatusOr<std::optional<std::array<double, 2>>> PairArg(const TransformArgs& args,
                                                             absl::string_view name) {
  if (AbsentOrNone(args, name)) return std::optional<std::array<double, 2>>();
  const bool translate = name == "translate";
  const char* expected = translate ? "None or (a, b), fractions of the width and height in [0, 1]"
                                   : "None or (lo, hi) with 0 < lo <= hi, both finite";
  absl::StatusOr<std::vector<double>> v = args.Numbers(name);
  if (!v.ok() || v->size() != 2) return args.Wrong(name, expected);
  const double lo = (*v)[0], hi = (*v)[1];
  const bool ok = translate ? (lo >= 0 && lo <= 1 && hi >= 0 && hi <= 1)
                            : (lo > 0 && lo <= hi && std::isfinite(hi));
  if (!ok) return args.Wrong(name, expected);
  return std::optional<std::array<double, 2>>(std::array<double, 2>{lo, hi});
}

std::string PairText(const std::optional<std::array<double, 2>>& v) {
  if (!v) return "None";
  return absl::StrCat("[", FormatDouble((*v)[0]), ", ", FormatDouble((*v)[1]), "]");
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> RandomAffine::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(ti::AffineCommonArgs common, ti::ParseAffineCommonArgs(args));
  using Pair = std::optional<std::array<double, 2>>;
  ASSIGN_OR_RETURN(const Pair translate, PairArg(args, "translate"));
  ASSIGN_OR_RETURN(const Pair scale, PairArg(args, "scale"));
  std::vector<double> shear;
  if (!AbsentOrNone(args, "shear")) {
    ASSIGN_OR_RETURN(shear, ti::AngleRangeArg(args, "shear", {2, 4}));
  }
  return std::unique_ptr<Transform>(
      new RandomAffine(std::move(common), translate, scale, std::move(shear)));
}

std::string RandomAffine::Identity() const {
  std::string shear = "None";
  if (!shear_.empty()) {
    shear = absl::StrCat(
        "[",
        absl::StrJoin(shear_, ", ",
                      [](std::string* out, double v) { out->append(FormatDouble(v)); }),
        "]");
  }
  return absl::StrCat(
      kName, "(degrees=[", FormatDouble(common_.degrees[0]), ", ", FormatDouble(common_.degrees[1]),
      "], translate=", PairText(translate_), ", scale=", PairText(scale_), ", shear=", shear,
      ", interpolation=", ti::InterpolationText(common_.interpolation),
      ", fill=", ti::FillText(common_.fill), ", center=", ti::CenterText(common_.center),
      ", pil=", common_.pil ? "True" : "False", ")");
}

absl::StatusOr<SampleSpec> RandomAffine::OutputSpec(const SampleSpec& in) const {
  RETURN_IF_ERROR(ti::CheckAffineInput(kName, in, common_));
  return in;
}

RandomAffine::Params RandomAffine::Draw(const SampleSpec& in, SampleRandom& rng) const {
  Params p;
  p.angle = ti::UniformFloat(rng, common_.degrees[0], common_.degrees[1]);
  if (translate_) {
    const double max_dx = (*translate_)[0] * in.width;
    const double max_dy = (*translate_)[1] * in.height;
    // Python's round(): halves to even (nearbyint's default mode).
    p.translate[0] = static_cast<int64_t>(std::nearbyint(ti::UniformFloat(rng, -max_dx, max_dx)));
    p.translate[1] = static_cast<int64_t>(std::nearbyint(ti::UniformFloat(rng, -max_dy, max_dy)));
  }
  if (scale_) p.scale = ti::UniformFloat(rng, (*scale_)[0], (*scale_)[1]);
  if (!shear_.empty()) {
    p.shear[0] = ti::UniformFloat(rng, shear_[0], shear_[1]);
    if (shear_.size() == 4) p.shear[1] = ti::UniformFloat(rng, shear_[2], shear_[3]);
  }
  return p;
}

std::string RandomAffine::Draws(const SampleSpec& in, SampleRandom& rng) const {
  const Params p = Draw(in, rng);
  return absl::StrCat("{\"angle\": ", FormatDouble(p.angle), ", \"translate\": [", p.translate[0],
                      ", ", p.translate[1], "], \"scale\": ", FormatDouble(p.scale),
                      ", \"shear\": [", FormatDouble(p.shear[0]), ", ", FormatDouble(p.shear[1]),
                      "]}");
}

void RandomAffine::Apply(const SampleSpec& in, const void* src, void* dst,
                         SampleRandom& rng) const {
  const Params p = Draw(in, rng);
  const std::array<double, 2> translate = {static_cast<double>(p.translate[0]),
                                           static_cast<double>(p.translate[1])};
  const std::array<double, 2> shear = {p.shear[0], p.shear[1]};
  if (common_.pil) {
    // F.affine on a PIL image: the matrix about the centre in pixels, (w / 2, h / 2) by default.
    const std::array<double, 2> center =
        common_.center ? *common_.center : std::array<double, 2>{in.width * 0.5, in.height * 0.5};
    const std::array<double, 6> matrix =
        ti::InverseAffineMatrix(center, p.angle, translate, p.scale, shear);
    ti::PilAffine(in, src, dst, matrix, common_.interpolation, common_.fill);
    return;
  }
  std::array<double, 2> center = {0.0, 0.0};
  if (common_.center) {
    center = {(*common_.center)[0] - in.width * 0.5, (*common_.center)[1] - in.height * 0.5};
  }
  const std::array<double, 6> matrix =
      ti::InverseAffineMatrix(center, p.angle, translate, p.scale, shear);
  ti::TensorAffine(in, src, dst, matrix, common_.interpolation, common_.fill);
}

}  // namespace sluice
