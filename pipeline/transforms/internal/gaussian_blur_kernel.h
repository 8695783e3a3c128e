// GaussianBlur's arithmetic (gaussian_blur.h has the semantics): torchvision's float32 1-D
// Gaussian weights, and the blur of a CHW sample with them as two passes (along the rows, then
// along the columns) over a float32 intermediate, each side padded by reflection. Built without
// FMA contraction (-ffp-contract=off), so the result is the same bits with or without -march.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_GAUSSIAN_BLUR_KERNEL_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_GAUSSIAN_BLUR_KERNEL_H_

#include <cstddef>
#include <cstdint>

#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

// The largest kernel side GaussianBlur takes: one sample's weights fit on the stack.
inline constexpr int kMaxGaussianKernel = 255;

// torchvision's _get_gaussian_kernel1d(size, sigma) in float32: x = linspace(-(size - 1) / 2,
// (size - 1) / 2, size), pdf = exp(-0.5 (x / sigma)^2), weights = pdf / sum(pdf). `size` odd in
// [1, kMaxGaussianKernel], sigma > 0; writes `size` weights.
void GaussianKernel1d(int size, float sigma, float* weights);

// Bytes of working memory GaussianBlurChw needs for a sample of up to `plane_values` values a
// channel and `width` columns with a kernel `kx` wide (64-byte aligned pieces).
size_t GaussianBlurScratchBytes(size_t plane_values, uint32_t width, int kx);

// Blurs each channel of the u8 or f32 CHW sample `src` (spec `in`) into `dst` with the weights
// wx (kx of them, along the width) and wy (ky, along the height): reflect padding by kx / 2 and
// ky / 2 (which must be less than the width and height), sums in float32, u8 rounded half to
// even. `scratch` holds GaussianBlurScratchBytes(in.plane_values(), in.width, kx) bytes,
// 64-byte aligned.
void GaussianBlurChw(const SampleSpec& in, const void* src, void* dst, const float* wx, int kx,
                     const float* wy, int ky, void* scratch);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_GAUSSIAN_BLUR_KERNEL_H_
