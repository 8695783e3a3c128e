// Bilinear resampling of a window of an interleaved u8 image (HWC, as the decoders write it)
// straight into CHW u8 planes, optionally mirrored left to right: RandomResizedCrop's resize
// where it follows DecodeImage, without splitting the whole decoded image into planes first
// (transform_chain.h, "Fused ops").
//
// The arithmetic is bilinear.h's, operation for operation (the same taps from BilinearTapOf,
// each needed source row interpolated along x in float32 as l0x * v0 + l1x * v1, two such rows
// blended as l0y * top + l1y * bottom, rounded half to even), so the output is bitwise what
// ResizeBilinear gives on the planes of the same image, followed by a flip when `mirror`. The
// AVX2 kernel (picked at run time where the CPU has AVX2) uses no FMA: a fused multiply-add
// would round once where the formula rounds twice. Both kernels are tested against
// ResizeBilinear bit for bit.
//
// Thread safety: pure functions of their arguments. Uses about 48 KiB of stack; allocates
// nothing.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_BILINEAR_INTERLEAVED_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_BILINEAR_INTERLEAVED_H_

#include <cstddef>
#include <cstdint>

namespace sluice::transforms_internal {

// Bytes readable past the first byte of an InterleavedU8Image's last pixel that the kernels may
// read (and ignore): they load 8 bytes at a time from any pixel.
inline constexpr size_t kInterleavedReadPadding = 16;

// Decoded pixels: `height` rows of `width` pixels, `pixel_bytes` bytes each (1: grey; 3: RGB;
// 4: RGBA, alpha ignored), rows `row_bytes` apart. Not owned. The buffer must hold
// kInterleavedReadPadding readable bytes after the start of the last pixel.
struct InterleavedU8Image {
  const uint8_t* pixels = nullptr;
  uint32_t height = 0;
  uint32_t width = 0;
  uint32_t pixel_bytes = 3;
  size_t row_bytes = 0;
};

enum class InterleavedKernel : uint8_t {
  kAuto,      // AVX2 where the CPU has it (RGB and RGBA), else kPortable
  kPortable,  // plain C++ (for tests: the AVX2 kernel must equal it)
};

// The window at rows [top, top + win_h) and columns [left, left + win_w) of `image` (inside
// it, both sides positive) resized to out_h x out_w into dst: `channels` planes of out_h x
// out_w u8. channels is 3 for RGB and RGBA images (R, G, B) and 1 or 3 for grey ones (3:
// the grey plane three times, as DecodeImage(mode=RGB) gives a grey image). With `mirror`,
// every output row is reversed (RandomHorizontalFlip after the resize).
void ResizeInterleavedU8(const InterleavedU8Image& image, uint32_t channels, uint32_t top,
                         uint32_t left, uint32_t win_h, uint32_t win_w, uint32_t out_h,
                         uint32_t out_w, bool mirror, uint8_t* dst,
                         InterleavedKernel kernel = InterleavedKernel::kAuto);

// Part of a resize: the window of rows [top, top + win_h) and columns [left, left + win_w)
// resized to full_out_h x full_out_w, of which only rows [out_top, out_top + out_h) and columns
// [out_left, out_left + out_w) are computed, into `channels` planes of out_h x out_w: the same
// bits as that part of ResizeInterleavedU8's (and ResizeBilinear's) whole output. `image` may
// hold only the source rows and columns the part reads: top and left are then negative or
// smaller (image row 0 is window row -top). Resize then CenterCrop after DecodeImage, with only
// the JPEG window that part reads decoded (transform_chain.h).
void ResizeInterleavedU8Region(const InterleavedU8Image& image, uint32_t channels, int64_t top,
                               int64_t left, uint32_t win_h, uint32_t win_w, uint32_t full_out_h,
                               uint32_t full_out_w, uint32_t out_top, uint32_t out_left,
                               uint32_t out_h, uint32_t out_w, uint8_t* dst,
                               InterleavedKernel kernel = InterleavedKernel::kAuto);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_BILINEAR_INTERLEAVED_H_
