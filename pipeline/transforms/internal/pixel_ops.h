// The arithmetic of RandomInvert, RandomPosterize, RandomSolarize, RandomAutocontrast,
// RandomEqualize and RandomAdjustSharpness (torchvision 0.14's F.invert, posterize, solarize,
// autocontrast, equalize, adjust_sharpness), each on one CHW sample of 1 or 3 channels, so that
// other ops (TrivialAugmentWide, RandAugment) can run them too:
//   Tensor*: functional_tensor.py on u8 samples, and on f32 samples (values in [0, 1]) where
//     torchvision takes floats (invert, solarize, autocontrast, sharpness).
//   Pil*: functional_pil.py (ImageOps.autocontrast, ImageEnhance.Sharpness) on u8 samples, where
//     PIL computes other values than the tensor path. PIL's ImageOps.invert, posterize, solarize
//     and equalize give the tensor path's bytes on u8 images (the same integer arithmetic), so
//     they have no Pil* form.
// Bit for bit against torchvision 0.14 and Pillow 9.4 (python/tests/test_pixel_ops.py), f32
// sharpness included on the CPUs measured: its 3x3 blur repeats torch's CPU convolution, one
// fused multiply-add per tap in row-major order. Built without FMA contraction
// (-ffp-contract=off), so every other float operation rounds as torch's and PIL's do.
// None allocates; all but the sharpness run in place.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PIXEL_OPS_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PIXEL_OPS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

// What these ops take: channels-first, 1 or 3 channels (torchvision's _assert_channels), u8, or
// f32 too where `f32_too`; u8 only where `pil` (PIL's images are 8-bit). kInvalidArgument naming
// `op` and the spec otherwise.
absl::Status CheckPixelOpInput(absl::string_view op, const SampleSpec& in, bool f32_too, bool pil);

// `data` holds one sample of spec `s` (CHW, 1 or 3 channels), u8 or f32 as each says; in place.

// bound - x: 255 - x on u8, 1 - x on f32.
void TensorInvert(const SampleSpec& s, void* data);
// x & ~(2^(8 - bits) - 1), bits in [0, 8] (0 blackens the image); u8 only.
void TensorPosterize(const SampleSpec& s, void* data, int bits);
// bound - x where x >= threshold, compared in float32 as torch compares a tensor with a Python
// number; x elsewhere. u8 or f32.
void TensorSolarize(const SampleSpec& s, void* data, double threshold);
// Per channel: (x - min) * (reciprocal(max - min) * bound) in float32, clamped to [0, bound]
// (u8 truncated); a channel of one value is left as it is. u8 or f32.
void TensorAutocontrast(const SampleSpec& s, void* data);
// Per channel, torchvision's _scale_channel: step = (count - count of the largest value) // 255;
// step 0 leaves the channel; else the lookup table (cumulative count before x + step // 2) //
// step, clipped at 255. u8 only.
void TensorEqualize(const SampleSpec& s, void* data);
// ImageOps.autocontrast (no cutoff): per channel, lo and hi the smallest and largest values;
// int(x * scale + offset) in double with scale = 255 / (hi - lo), offset = -lo * scale, clipped;
// hi <= lo leaves the channel. u8 only.
void PilAutocontrast(const SampleSpec& s, void* data);

// The sharpness blends: src -> dst (the blur reads the neighbours; they must not overlap).
// torchvision's adjust_sharpness: the image blurred by [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13
// (float32 weights; u8 rounded half to even) inside a one-pixel border that keeps its values,
// then _blend: factor * x + (1 - factor) * blurred in float32, clamped, u8 truncated; an image
// 2 pixels or fewer high or wide is copied. u8 or f32.
void TensorSharpness(const SampleSpec& s, const void* src, void* dst, double factor);
// ImageEnhance.Sharpness(img).enhance(factor): PIL's SMOOTH filter (the same kernel, float32
// sums from 0.5, truncated; the border copied) as the degenerate image, then Image.blend(
// degenerate, img, factor): d + factor * (x - d) in float32, truncated, clipped when factor lies
// outside [0, 1]. u8 only.
void PilSharpness(const SampleSpec& s, const void* src, void* dst, double factor);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PIXEL_OPS_H_
