// The colour adjustments ColorJitter runs (color_jitter.h has the op), each in place on one CHW
// sample of 1 or 3 channels, with either semantics of the user's pipeline:
//   Tensor*: torchvision 0.14's functional_tensor.py on u8 or f32 samples. _blend is
//     (f * x + (1 - f) * y).clamp(0, bound) in float32, one rounding per product and sum, cast
//     back to the input's dtype (u8 truncates); contrast's y is the float32 mean of the grey
//     image (rgb_to_grayscale, truncated for u8); saturation's y the grey pixel; hue converts
//     to HSV and back with _rgb2hsv and _hsv2rgb's float32 operations, u8 through x / 255 and
//     back through (x * 255) truncated.
//   Pil*: Pillow's ImageEnhance (Brightness, Contrast, Color) and torchvision's F_pil.adjust_hue
//     on u8 samples. ImageEnhance blends with ImagingBlend: in1 + alpha * (in2 - in1) in
//     float, truncated, clipped when alpha is outside [0, 1]; the degenerate image is black,
//     the mean of the L image rounded to an integer, or the L image. Hue goes through Pillow's
//     RGB -> HSV bytes, adds int(hue * 255) to H modulo 256, and comes back through HSV -> RGB.
// A 1-channel sample: saturation and hue leave it as it is (as both libraries do).
// Bit for bit against torchvision and PIL (python/tests/test_color_jitter.py), except where a
// mean is summed: torch sums float32 grey images in its own order (a float sample's contrast).
// Built without FMA contraction (-ffp-contract=off), so every float operation rounds as theirs.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_COLOR_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_COLOR_H_

#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

// `data` holds one sample of spec `s` (CHW, 1 or 3 channels; u8 or f32 for Tensor*, u8 for Pil*).
void TensorBrightness(const SampleSpec& s, void* data, float factor);
void TensorContrast(const SampleSpec& s, void* data, float factor);
void TensorSaturation(const SampleSpec& s, void* data, float factor);
void TensorHue(const SampleSpec& s, void* data, float hue);

void PilBrightness(const SampleSpec& s, void* data, float factor);
void PilContrast(const SampleSpec& s, void* data, float factor);
void PilSaturation(const SampleSpec& s, void* data, float factor);
void PilHue(const SampleSpec& s, void* data, float hue);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_COLOR_H_
