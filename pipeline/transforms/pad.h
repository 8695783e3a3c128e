// Pad: torchvision.transforms.Pad (0.14) on one CHW sample: `padding` pixels added on each side
// (one int: every side; two: left/right, top/bottom; four: left, top, right, bottom), filled
// with `fill` (constant), the border value (edge), or the image mirrored without (reflect) or
// with (symmetric) repeating the border, as F.pad does on a tensor and on a PIL image (the same
// pixels: padding moves values, it computes none). Any element type; a u8 fill is an integer in
// [0, 255]. Deterministic: evaluation keeps it.
#ifndef SLUICE_PIPELINE_TRANSFORMS_PAD_H_
#define SLUICE_PIPELINE_TRANSFORMS_PAD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/padded_window.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

struct PadOptions {
  uint32_t left = 0, top = 0, right = 0, bottom = 0;
  double fill = 0;
  transforms_internal::PaddingMode mode = transforms_internal::PaddingMode::kConstant;
};

class Pad final : public Transform {
 public:
  static constexpr absl::string_view kName = "Pad";
  static constexpr absl::string_view kParams[] = {"padding", "fill", "padding_mode"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  // kInvalidArgument for a fill that is not finite.
  static absl::StatusOr<std::unique_ptr<Pad>> Create(const PadOptions& options);

  std::string Identity() const override;
  // The padded size; kInvalidArgument for a u8 fill that is not an integer in [0, 255], or a
  // reflect (symmetric) padding not less than (at most) the side it mirrors.
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;

 private:
  explicit Pad(const PadOptions& o) : o_(o) {}
  PadOptions o_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_PAD_H_
