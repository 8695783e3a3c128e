// CenterCrop: torchvision.transforms.CenterCrop (0.14) on one CHW sample. The offset on each
// axis is round((side - crop) / 2) with Python's rounding (halves to even: a 5-wide margin
// puts 2 before the crop, a 3-wide one 2); a side shorter than the crop is first padded with
// zeros by (crop - side) // 2 before and the rest after. Any element type; no randomness.
#ifndef SLUICE_PIPELINE_TRANSFORMS_CENTER_CROP_H_
#define SLUICE_PIPELINE_TRANSFORMS_CENTER_CROP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/jpeg_window.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class CenterCrop final : public Transform {
 public:
  static constexpr absl::string_view kName = "CenterCrop";
  static constexpr absl::string_view kParams[] = {"size"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  CenterCrop(uint32_t height, uint32_t width) : height_(height), width_(width) {}

  std::string Identity() const override;
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::optional<std::pair<uint32_t, uint32_t>> SizeItMakes() const override {
    return std::make_pair(height_, width_);
  }

  // The part of a height x width image the crop keeps: the centred crop where the crop is
  // shorter than the side, the whole side where it is longer (that side is padded). Cropping
  // that part alone gives the same pixels as cropping the whole image (the chain decodes only
  // it, transform_chain.h).
  transforms_internal::PixelWindow SourceWindow(uint32_t height, uint32_t width) const;

 private:
  uint32_t height_;
  uint32_t width_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_CENTER_CROP_H_
