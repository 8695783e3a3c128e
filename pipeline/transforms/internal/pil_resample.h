// Resampling as PIL's Image.resize computes it on 8-bit images (Pillow 9's Resample.c,
// ImagingResample): the resize torchvision's transforms apply to a PIL image, where it always
// antialiases (transforms.Resize, RandomResizedCrop before ToTensor in an ImageFolder pipeline).
//
// Per axis resized from n to m (scale = n / m, filterscale = max(scale, 1), support = the
// filter's support x filterscale), output coordinate d has centre c = (d + 0.5) x scale, taps
// [int(c - support + 0.5) clamped at 0, int(c + support + 0.5) clamped at n), and weights
// filter((i - c + 0.5) / filterscale) normalized to sum 1, all in double; the weights are then
// rounded to fixed point with 22 fractional bits (half away from zero). The horizontal pass runs
// first, over the rows the vertical pass reads, and its output is clipped to 8 bits (PIL's
// intermediate image); the vertical pass reads that. Each sum starts at half of the last bit and
// is clipped to [0, 255] after the shift. An axis whose size does not change is not resampled;
// an image whose two sizes do not change is copied. Channels are resampled independently.
//
// Bilinear (the triangle filter, support 1) and bicubic (Keys' cubic with a = -0.5, support 2).
// Compiled without floating-point contraction (CMakeLists.txt), as the weights must round as
// PIL's, built without FMA, round them.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PIL_RESAMPLE_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PIL_RESAMPLE_H_

#include <cstddef>
#include <cstdint>

namespace sluice::transforms_internal {

enum class PilFilter : uint8_t { kBilinear, kBicubic };

// An 8-bit image or a window of one, in any layout: pixel (c, y, x) is at
// data[y * row_stride + x * pixel_stride + c * channel_stride]. Interleaved (a decoder's rows):
// pixel_stride = channels, channel_stride = 1; planar CHW: pixel_stride = 1, channel_stride =
// height x width of the whole plane.
struct U8ImageView {
  const uint8_t* data = nullptr;
  size_t row_stride = 0;
  size_t pixel_stride = 1;
  size_t channel_stride = 0;
  uint32_t channels = 1;
  uint32_t height = 0;
  uint32_t width = 0;
};

// `src` (both sides positive) resized to out_h x out_w (both positive) as PIL resizes it, into
// dst as src.channels planes of out_h x out_w; with `mirror` every output row is reversed (a
// horizontal flip after the resize). Allocates a per-thread buffer for the intermediate image
// and the weights, kept for the next call.
void PilResample(const U8ImageView& src, uint32_t out_h, uint32_t out_w, PilFilter filter,
                 bool mirror, uint8_t* dst);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PIL_RESAMPLE_H_
