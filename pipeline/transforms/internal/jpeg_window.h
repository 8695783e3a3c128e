// Decoding only a window of a JPEG (issue 36): when the first size-fixing op after DecodeImage
// needs only part of the image (RandomResizedCrop's window, CenterCrop), the libjpeg API of
// libjpeg-turbo decodes only the iMCU columns (jpeg_crop_scanline) and rows
// (jpeg_skip_scanlines) that cover it, and stops after the window's last row.
//
// Exactness: the window's pixels are bitwise those of DecodeImage's full decode (tjDecompress2:
// accurate integer IDCT JDCT_ISLOW, fancy upsampling, RGB or grey out) cut to the window. The
// crop is widened by one chroma sample each side where fancy upsampling needs the neighbour the
// crop would cut off (jpeg_window.cc says why; no rows are added: libjpeg reads the context rows
// itself); jpeg_window_test.cc compares windows against the full decode byte for byte
// for every subsampling, progressive and restart-marker JPEGs.
//
// What it does not see: damage in the data after the window's last row (a single-scan JPEG is
// read only up to there; a window down to the image's last row reads on to the EOI, as the full
// decode does, and fails where it fails). A multi-scan (progressive) JPEG is read whole before any
// row is output, so there it sees everything the full decode sees, and saves only the IDCT,
// upsampling and colour conversion outside the window.
//
// Errors are DecodeImage's (decode_image.cc, DecodeJpeg), with the same messages, all kDataLoss:
// "corrupt JPEG header: ...", "CMYK JPEG; ...", the scan-count check (storage/image_structure.h,
// kMaxJpegScans, also enforced by a progress monitor as TJFLAG_LIMITSCANS does), "corrupt JPEG:
// <libjpeg's message>" for a libjpeg error, "damaged or truncated JPEG: <message>" where a libjpeg
// warning came (a truncated or damaged stream; as TurboJPEG, decoding goes on after a warning and
// the message is the first warning's, or the error's that ended it). A window not inside the
// image, or an output buffer too small, is kInvalidArgument (the caller's mistake, not the
// record's).
//
// Thread safety: pure functions of their arguments; libjpeg's working memory is its own, per
// call (its pools, freed before returning). Not bounded here: the caller checks the declared
// size (ReadJpegHeader) against its bound before calling DecodeJpegWindow.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_JPEG_WINDOW_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_JPEG_WINDOW_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/bilinear_interleaved.h"

namespace sluice::transforms_internal {

// A rectangle of an image in pixels: columns [x, x + width), rows [y, y + height).
struct PixelWindow {
  uint32_t x = 0;
  uint32_t y = 0;
  uint32_t width = 0;
  uint32_t height = 0;
};

// What a JPEG's header declares, read without decoding any pixel.
struct JpegHeader {
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t pixel_bytes = 3;  // 1: a grey JPEG (decoded to grey); 3: colour (decoded to RGB)
};

// The JPEG's size and colour kind, through tjDecompressHeader3 as DecodeImage reads it (so the
// same JPEGs pass, with the same errors): kDataLoss "corrupt JPEG header: ..." or for CMYK/YCCK.
absl::StatusOr<JpegHeader> ReadJpegHeader(absl::string_view jpeg);

// PIL's Image.draft("RGB", (width, height)) for a JPEG of header.width x header.height: the
// reduced scale 1/s it decodes at, s the largest of 8, 4, 2, 1 with s <= min(header.width /
// width, header.height / height) (integer division), so that both sides stay at least the
// requested ones where they can. 1 where the image is smaller than twice the request.
uint32_t DraftScale(const JpegHeader& header, uint32_t height, uint32_t width);

// The image's size decoded at 1/scale (libjpeg's and PIL's: each side rounded up).
JpegHeader ScaledHeader(const JpegHeader& header, uint32_t scale);

// Bytes DecodeJpegWindow needs at `out` for `window` of a JPEG with `pixel_bytes` (its
// JpegHeader): the window's pixels and kInterleavedReadPadding after them, so that the result
// can go to ResizeInterleavedU8.
size_t JpegWindowBytes(const PixelWindow& window, uint32_t pixel_bytes);

// Decodes `window` of `jpeg` (at 1/scale, scale 1, 2, 4 or 8: the window is then in the
// reduced image's pixels, ScaledHeader, decoded through libjpeg's scaled accurate IDCT as PIL's
// draft does) into `out` (out_capacity bytes, at least JpegWindowBytes): the
// window's rows, interleaved RGB (3 bytes a pixel) for a colour JPEG or grey (1 byte) for a grey
// one, rows width * pixel_bytes apart. Returns the image at `out` (not owned). Where
// `pixels_decoded` is not null, it receives the area that went through the IDCT (the crop's iMCU
// columns x the iMCU rows the window touches, plus one above and one below where a component is
// vertically subsampled, as fancy upsampling reads those): what the report sets against the
// image's width x height. The entropy decoding is not windowed: every MCU up to the
// window's last iMCU row is Huffman-decoded.
absl::StatusOr<InterleavedU8Image> DecodeJpegWindow(absl::string_view jpeg,
                                                    const PixelWindow& window, uint8_t* out,
                                                    size_t out_capacity,
                                                    uint64_t* pixels_decoded = nullptr,
                                                    uint32_t scale = 1);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_JPEG_WINDOW_H_
