#include "pipeline/transforms/registry.h"

#include "absl/strings/str_join.h"
#include "pipeline/transforms/center_crop.h"
#include "pipeline/transforms/color_jitter.h"
#include "pipeline/transforms/decode_image.h"
#include "pipeline/transforms/gaussian_blur.h"
#include "pipeline/transforms/grayscale.h"
#include "pipeline/transforms/normalize.h"
#include "pipeline/transforms/pad.h"
#include "pipeline/transforms/random_adjust_sharpness.h"
#include "pipeline/transforms/random_affine.h"
#include "pipeline/transforms/random_apply.h"
#include "pipeline/transforms/random_autocontrast.h"
#include "pipeline/transforms/random_choice.h"
#include "pipeline/transforms/random_crop.h"
#include "pipeline/transforms/random_equalize.h"
#include "pipeline/transforms/random_erasing.h"
#include "pipeline/transforms/random_grayscale.h"
#include "pipeline/transforms/random_horizontal_flip.h"
#include "pipeline/transforms/random_invert.h"
#include "pipeline/transforms/random_posterize.h"
#include "pipeline/transforms/random_resized_crop.h"
#include "pipeline/transforms/random_rotation.h"
#include "pipeline/transforms/random_solarize.h"
#include "pipeline/transforms/random_vertical_flip.h"
#include "pipeline/transforms/resize.h"
#include "pipeline/transforms/to_dtype.h"

namespace sluice {
namespace {
template <typename Op>
constexpr TransformInfo Entry() {
  return TransformInfo{Op::kName, Op::kParams, &Op::FromArgs};
}

// One line per op, sorted by name.
// clang-format off
const TransformInfo kTransforms[] = {
    Entry<CenterCrop>(),
    Entry<ColorJitter>(),
    Entry<DecodeImage>(),
    Entry<GaussianBlur>(),
    Entry<Grayscale>(),
    Entry<Normalize>(),
    Entry<Pad>(),
    Entry<RandomAdjustSharpness>(),
    Entry<RandomAffine>(),
    Entry<RandomApply>(),
    Entry<RandomAutocontrast>(),
    Entry<RandomChoice>(),
    Entry<RandomCrop>(),
    Entry<RandomEqualize>(),
    Entry<RandomErasing>(),
    Entry<RandomGrayscale>(),
    Entry<RandomHorizontalFlip>(),
    Entry<RandomInvert>(),
    Entry<RandomPosterize>(),
    Entry<RandomResizedCrop>(),
    Entry<RandomRotation>(),
    Entry<RandomSolarize>(),
    Entry<RandomVerticalFlip>(),
    Entry<Resize>(),
    Entry<ToDtype>(),
};
// clang-format on
}  // namespace

absl::Span<const TransformInfo> RegisteredTransforms() { return kTransforms; }

const TransformInfo* FindTransform(absl::string_view name) {
  for (const TransformInfo& info : kTransforms) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::string RegisteredTransformNames() {
  return absl::StrJoin(kTransforms, ", ", [](std::string* out, const TransformInfo& info) {
    out->append(info.name.data(), info.name.size());
  });
}

}  // namespace sluice
