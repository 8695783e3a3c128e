// RandomCrop: torchvision.transforms.RandomCrop (0.14) on one CHW sample. Pads by `padding`
// (left, top, right, bottom) with `padding_mode`; with pad_if_needed, pads a side shorter than
// the crop again, by (crop - side) on both of its ends, as torchvision does; then crops
// size.height x size.width at a uniform offset (top in [0, H' - h], left in [0, W' - w]) drawn
// from the sample's SampleRandom. Any element type; the fill must be representable in it.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_CROP_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_CROP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/padded_window.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

struct RandomCropOptions {
  uint32_t height = 0;
  uint32_t width = 0;
  uint32_t pad_left = 0, pad_top = 0, pad_right = 0, pad_bottom = 0;
  bool pad_if_needed = false;
  double fill = 0;
  transforms_internal::PaddingMode padding_mode = transforms_internal::PaddingMode::kConstant;
};

class RandomCrop final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomCrop";
  static constexpr absl::string_view kParams[] = {"size", "padding", "pad_if_needed", "fill",
                                                  "padding_mode"};
  // size: int or (h, w); padding: int, (left/right, top/bottom) or (l, t, r, b); fill: a number;
  // padding_mode: constant, edge, reflect or symmetric.
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  static absl::StatusOr<std::unique_ptr<RandomCrop>> Create(const RandomCropOptions& options);

  std::string Identity() const override;
  std::string EvalForm() const override;  // CenterCrop(size=(height, width))
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

 private:
  explicit RandomCrop(const RandomCropOptions& o) : o_(o) {}
  // The rows and columns of the padded image for input `in`.
  void PaddedAxes(const SampleSpec& in, transforms_internal::PaddedAxis& rows,
                  transforms_internal::PaddedAxis& cols) const;

  RandomCropOptions o_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_CROP_H_
