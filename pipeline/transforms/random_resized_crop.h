// RandomResizedCrop: torchvision.transforms.RandomResizedCrop (0.14) on one CHW tensor. Draws a
// window with torchvision's get_params: up to 10 attempts of an area fraction uniform in
// `scale` and an aspect ratio log-uniform in `ratio`, w = round(sqrt(area * aspect)),
// h = round(sqrt(area / aspect)) (halves to even, as Python's round), accepted when
// 0 < w <= width and 0 < h <= height, at a uniform offset; else the centre fallback (the whole
// image, cut to the nearer end of `ratio`). The window is then resized bilinearly (no
// antialiasing, internal/bilinear.h) to `size`; with antialias=True as PIL resizes the crop
// (internal/pil_resample.h: torchvision's RandomResizedCrop on a PIL image, uint8 only). The draws
// come from SampleRandom, so a window is a function of (seed, epoch, index, position) only; they
// are not torch's generator. Fixes the size: takes images whose size varies per sample. Any element
// type.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_RESIZED_CROP_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_RESIZED_CROP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/bilinear_interleaved.h"
#include "pipeline/transforms/internal/pil_resample.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

struct CropWindow {
  uint32_t top = 0;
  uint32_t left = 0;
  uint32_t height = 0;
  uint32_t width = 0;
  bool operator==(const CropWindow&) const = default;
};

class RandomResizedCrop final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomResizedCrop";
  static constexpr absl::string_view kParams[] = {"size", "scale", "ratio", "interpolation",
                                                  "antialias"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  // scale: [lo, hi] with 0 < lo <= hi; ratio: [lo, hi] with 0 < lo <= hi.
  static absl::StatusOr<std::unique_ptr<RandomResizedCrop>> Create(
      uint32_t height, uint32_t width, const double scale[2], const double ratio[2],
      bool antialias = false,
      transforms_internal::PilFilter filter = transforms_internal::PilFilter::kBilinear);
  // PIL's resampling of the crop (antialias=True).
  bool antialias() const { return antialias_; }

  // torchvision's get_params for an image of height x width (both positive).
  CropWindow Window(uint32_t height, uint32_t width, SampleRandom& rng) const;

  std::string Identity() const override;
  // Resize(size=floor(max(height, width) / 0.875), the same interpolation and antialias),
  // CenterCrop(size=(height, width)): 224 gives torchvision's Resize(256), CenterCrop(224).
  std::string EvalForm() const override;
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;
  std::optional<std::pair<uint32_t, uint32_t>> SizeItMakes() const override {
    return std::make_pair(height_, width_);
  }

  // The chain's fused path after DecodeImage (transform_chain.h, "Fused ops"): the same window
  // (the same draws from rng) and the same resize, bit for bit, read from the decoder's
  // interleaved pixels, written as `channels` u8 planes of size(); with `mirror` every row is
  // reversed, as a RandomHorizontalFlip after this op does.
  void ApplyInterleaved(const transforms_internal::InterleavedU8Image& image, uint32_t channels,
                        bool mirror, SampleRandom& rng, uint8_t* dst) const;
  // The same resize of `window`, the pixels of a window already drawn (Window) and decoded
  // alone (DecodeImage::DecodeJpegWindow): the whole of it is the crop.
  void ResizeWindow(const transforms_internal::InterleavedU8Image& window, uint32_t channels,
                    bool mirror, uint8_t* dst) const;

 private:
  RandomResizedCrop(uint32_t height, uint32_t width, const double scale[2], const double ratio[2],
                    bool antialias, transforms_internal::PilFilter filter);
  // The crop `win` of `image` (a view of the whole image) through PIL's resampling.
  void PilResize(const transforms_internal::InterleavedU8Image& image, uint32_t channels,
                 const CropWindow& win, bool mirror, uint8_t* dst) const;

  uint32_t height_;
  uint32_t width_;
  double scale_[2];
  double ratio_[2];
  bool antialias_;
  transforms_internal::PilFilter filter_;  // with antialias_: PIL's filter
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_RESIZED_CROP_H_
