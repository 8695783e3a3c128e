// ToDtype: a value cast of one sample to u8, f16, bf16 or f32, like torchvision's
// transforms.v2.ToDtype(dtype, scale=False), i.e. tensor.to(dtype). It does not rescale: u8 200
// becomes 200.0, not 0.784 (Normalize does ToTensor's x / 255). Floats round to nearest even
// (f16 is IEEE binary16, bf16 the upper half of a binary32; NaN stays NaN); to u8, values
// truncate toward zero as a C++ cast does, and where that cast is undefined (NaN, below -1,
// 256 and up) ToDtype saturates to 0 or 255 (torch's result there is unspecified). Any layout.
#ifndef SLUICE_PIPELINE_TRANSFORMS_TO_DTYPE_H_
#define SLUICE_PIPELINE_TRANSFORMS_TO_DTYPE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class ToDtype final : public Transform {
 public:
  static constexpr absl::string_view kName = "ToDtype";
  static constexpr absl::string_view kParams[] = {"dtype", "scale"};
  // dtype: u8, f16, bf16, f32 or torch's names (uint8, float16, half, bfloat16, float32, float,
  // with or without "torch."); scale: False only (True would be ConvertImageDtype's rescale).
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  explicit ToDtype(ElementType dtype) : dtype_(dtype) {}

  std::string Identity() const override;
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;

 private:
  ElementType dtype_;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_TO_DTYPE_H_
