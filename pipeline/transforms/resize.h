// Resize: torchvision.transforms.Resize (0.14) on one CHW tensor, bilinear without antialiasing
// (torchvision's default for tensors; F.interpolate(align_corners=False), internal/bilinear.h).
// With antialias=True, PIL's resampling instead (internal/pil_resample.h): the pixels
// torchvision's Resize gives on a PIL image, bit for bit (bilinear, or bicubic); it takes uint8
// images only.
// size=(h, w) gives exactly h x w; size=s (or [s]) gives the smaller edge s and the other
// int(s * long / short), capped by max_size as torchvision does. Any element type.
//
// On sizes that vary per sample (after DecodeImage), (h, w) fixes the size; s keeps it varying,
// bounded by max(s, the input bound) per side (or max_size), and a sample whose output would
// not fit the chain's scratch for that bound is refused as a data error.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RESIZE_H_
#define SLUICE_PIPELINE_TRANSFORMS_RESIZE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/pil_resample.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class Resize final : public Transform {
 public:
  static constexpr absl::string_view kName = "Resize";
  static constexpr absl::string_view kParams[] = {"size", "interpolation", "max_size", "antialias"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  // Exactly height x width.
  static std::unique_ptr<Resize> Exact(
      uint32_t height, uint32_t width, bool antialias = false,
      transforms_internal::PilFilter filter = transforms_internal::PilFilter::kBilinear);
  // The smaller edge to `smaller_edge`; max_size 0 means none (else it must exceed the edge).
  static absl::StatusOr<std::unique_ptr<Resize>> SmallerEdge(
      uint32_t smaller_edge, uint32_t max_size, bool antialias = false,
      transforms_internal::PilFilter filter = transforms_internal::PilFilter::kBilinear);
  // PIL's resampling (antialias=True).
  bool antialias() const { return antialias_; }

  std::string Identity() const override;
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::optional<std::pair<uint32_t, uint32_t>> SizeItMakes() const override {
    return std::make_pair(height_, width_);
  }

 private:
  Resize(uint32_t height, uint32_t width, bool smaller_edge, uint32_t max_size, bool antialias,
         transforms_internal::PilFilter filter)
      : height_(height),
        width_(width),
        smaller_edge_(smaller_edge),
        max_size_(max_size),
        antialias_(antialias),
        filter_(filter) {}

  uint32_t height_;  // with smaller_edge_: the edge (height_ == width_)
  uint32_t width_;
  bool smaller_edge_;
  uint32_t max_size_;  // 0: none
  bool antialias_;
  transforms_internal::PilFilter filter_;  // with antialias_: PIL's filter
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RESIZE_H_
