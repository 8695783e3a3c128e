// RandomErasing: torchvision.transforms.RandomErasing(p, scale, ratio, value, inplace) (0.14) on
// one CHW tensor, u8 or f32. With probability p (a uniform draw u in [0, 1) below p) it draws a
// window with torchvision's get_params: up to 10 attempts of an area uniform in `scale` of the
// image's and an aspect log-uniform in `ratio`, h = round(sqrt(area * aspect)),
// w = round(sqrt(area / aspect)) (halves to even, as Python's round), accepted when h < height
// and w < width, at a uniform offset; after 10 failed attempts the sample is unchanged, as
// torchvision's. The window of every channel becomes `value`: one number for all channels or
// one per channel, as float32 (truncated to u8 on u8 samples, as torch's assignment), or
// 'random', standard normal float32 values (f32 samples only) in channel, row, column order.
// The draws come from SampleRandom (the normals by Box-Muller), not torch's generator. inplace
// is accepted and has no effect (sluice writes a new buffer). torchvision refuses PIL images
// here, so there is no PIL form. Draws() reports the window. Evaluation leaves it out.
#ifndef SLUICE_PIPELINE_TRANSFORMS_RANDOM_ERASING_H_
#define SLUICE_PIPELINE_TRANSFORMS_RANDOM_ERASING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class RandomErasing final : public Transform {
 public:
  static constexpr absl::string_view kName = "RandomErasing";
  static constexpr absl::string_view kParams[] = {"p", "scale", "ratio", "value", "inplace"};
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);

  // One sample's draws: whether it is erased and the window [top, top + height) x
  // [left, left + width) (a height or width of 0 erases nothing).
  struct Params {
    bool erase = false;
    uint32_t top = 0;
    uint32_t left = 0;
    uint32_t height = 0;
    uint32_t width = 0;
    bool operator==(const Params&) const = default;
  };

  // The window for a sample of spec `in`: the draw against p, then get_params' attempts.
  Params Draw(const SampleSpec& in, SampleRandom& rng) const;

  // inplace is left out: it changes nothing sluice computes.
  std::string Identity() const override;
  std::string EvalForm() const override { return ""; }  // evaluation erases nothing
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  std::string Draws(const SampleSpec& in, SampleRandom& rng) const override;

 private:
  RandomErasing(double p, const double scale[2], const double ratio[2], std::vector<float> value)
      : p_(p), scale_{scale[0], scale[1]}, ratio_{ratio[0], ratio[1]}, value_(std::move(value)) {}

  double p_;
  double scale_[2];
  double ratio_[2];
  std::vector<float> value_;  // one, or one per channel; empty: 'random'
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_RANDOM_ERASING_H_
