#include "pipeline/transforms/internal/luma.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/internal/op_checks.h"

namespace sluice::transforms_internal {
absl::Status CheckGreyInput(absl::string_view op, const SampleSpec& in, bool pil) {
  RETURN_IF_ERROR(CheckChannelsFirst(op, in));
  if (in.channels != 1 && in.channels != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expected 1 or 3 channels, got ", SampleSpecString(in)));
  }
  if (pil && in.dtype != ElementType::kU8) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": pil=True is PIL's convert(\"L\") on u8 images, got ", SampleSpecString(in),
        "; put it before Normalize or ToDtype, or use pil=False (torchvision's tensor path)"));
  }
  if (in.dtype != ElementType::kU8 && in.dtype != ElementType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": expected u8 or f32 samples, got ",
                                                   SampleSpecString(in),
                                                   "; put ToDtype(float32) before it"));
  }
  return absl::OkStatus();
}

void ToGrey(const SampleSpec& in, const void* src, void* dst, uint32_t out_channels, bool pil) {
  const size_t plane = in.plane_values();
  const size_t bytes = plane * ElementSize(in.dtype);
  if (in.channels == 1) {
    std::memcpy(dst, src, bytes);
  } else if (in.dtype == ElementType::kU8) {
    const uint8_t* r = static_cast<const uint8_t*>(src);
    const uint8_t* g = r + plane;
    const uint8_t* b = g + plane;
    uint8_t* out = static_cast<uint8_t*>(dst);
    if (pil) {
      for (size_t i = 0; i < plane; ++i) out[i] = PilLuma(r[i], g[i], b[i]);
    } else {  // at most 254.97: the cast truncates, as .to(torch.uint8)
      for (size_t i = 0; i < plane; ++i) {
        out[i] = static_cast<uint8_t>(TensorLuma(r[i], g[i], b[i]));
      }
    }
  } else {
    const float* r = static_cast<const float*>(src);
    const float* g = r + plane;
    const float* b = g + plane;
    float* out = static_cast<float*>(dst);
    for (size_t i = 0; i < plane; ++i) out[i] = TensorLuma(r[i], g[i], b[i]);
  }
  char* planes = static_cast<char*>(dst);
  for (uint32_t c = 1; c < out_channels; ++c) std::memcpy(planes + c * bytes, planes, bytes);
}

}  // namespace sluice::transforms_internal
