// DecodeImage: the first op of a chain over encoded image records (torchvision.io.decode_image
// with mode=ImageReadMode.RGB or GRAY, as PIL's Image.open(f).convert(mode) gives it, which is
// torchvision ImageFolder's loader). Reads one JPEG (TurboJPEG) or PNG (libspng) record and
// writes u8 CHW pixels of the image's own size: mode=RGB gives 3 channels, mode=L one.
//
// - JPEG: tjDecompress2 with flags 0: libjpeg's accurate integer IDCT (JDCT_ISLOW) and fancy
//   (smooth) chroma upsampling, the defaults PIL 9.4 decodes with on the same libjpeg-turbo
//   2.1.5, so pixels are bitwise PIL's. Grey JPEGs give equal planes for RGB; CMYK is refused.
//   A libjpeg warning (a truncated or damaged stream) is refused like an error.
// - PNG: grey, grey+alpha, RGB, RGBA and palette at 8 bits or fewer; alpha is dropped (PIL's
//   convert does not composite); no gamma is applied. 16-bit PNGs are refused.
// - mode=L from colour: PIL's L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16.
// - The input spec's height and width (EncodedSampleSpec) bound the image, and its max_pixels
//   (when set) the image's width x height: a larger declared size is refused from the header,
//   before any decoding (a decompression bomb). 1x1 decodes. The scratch is sized from the
//   area bound (SampleSpec::plane_values()), not from the box of the two sides.
// - draft (opt in, issue 36): a JPEG decodes at 1/2, 1/4 or 1/8 of its size through libjpeg's
//   scaled accurate IDCT, as PIL's Image.draft("RGB", (width, height)) does for a requested
//   size: the scale is the largest of 8, 4, 2, 1 not over min(W // width, H // height), so both
//   sides stay at least the requested ones, and the image is each side / scale rounded up. The
//   pixels are bitwise PIL's `im.draft("RGB", (w, h)); im.convert(mode)`. draft=True takes the
//   size from the first Resize, RandomResizedCrop or CenterCrop after DecodeImage (resolved when
//   the chain is parsed, parse.cc; the identity names the size). PNGs decode whole, as in PIL.
// Per-sample failures are kDataLoss with the reason (empty, not a JPEG or PNG, corrupt,
// truncated, over the bound). The codecs' own working memory is theirs (libjpeg's per-image
// pools, a libspng context per image); the pixels go to the chain's buffers: the codec writes
// them interleaved into the op's scratch, then ApplyVariable splits them into planes at dst.
// DecodeInterleaved stops before the split, for the chain's fused path where RandomResizedCrop
// follows (transform_chain.h, "Fused ops").
#ifndef SLUICE_PIPELINE_TRANSFORMS_DECODE_IMAGE_H_
#define SLUICE_PIPELINE_TRANSFORMS_DECODE_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/internal/bilinear_interleaved.h"
#include "pipeline/transforms/internal/jpeg_window.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

class DecodeImage final : public Transform {
 public:
  static constexpr absl::string_view kName = "DecodeImage";
  static constexpr absl::string_view kParams[] = {"mode", "draft"};
  // mode: RGB or L (also GRAY, ImageReadMode.RGB, ImageReadMode.GRAY). draft: False (the
  // default), True (the size of the next op that makes one; ParseTransforms resolves it), or a
  // requested size, an int (a square) or (h, w).
  static absl::StatusOr<std::unique_ptr<Transform>> FromArgs(const TransformArgs& args);
  explicit DecodeImage(uint32_t channels) : channels_(channels) {}
  // draft_height x draft_width: PIL's draft size (0 x 0: none).
  DecodeImage(uint32_t channels, uint32_t draft_height, uint32_t draft_width)
      : channels_(channels), draft_height_(draft_height), draft_width_(draft_width) {}

  std::string Identity() const override;
  // A draft sized from the op after it (draft=True) stays draft=True: the evaluation chain's
  // Resize sizes it anew.
  std::string EvalForm() const override;
  // Takes EncodedSampleSpec only; gives u8 CxHxW CHW varying, bounded by the input's size.
  absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const override;
  // Never called: a decode's size is known only per record (ApplyVariable).
  void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const override;
  absl::StatusOr<SampleSpec> ApplyVariable(const SampleSpec& in, const SampleBuffers& io,
                                           SampleRandom& rng) const override;
  // Interleaved pixels before the channels are split: up to 4 bytes per pixel of the bound
  // (its area, bound.plane_values()), and the kernels' read padding after them.
  size_t ScratchBytes(const SampleSpec& bound) const override;

  // The decode without the split into planes: the pixels as the codec wrote them into
  // io.op_scratch (which must hold ScratchBytes(in)): RGB (3 bytes a pixel), RGBA (4, from a
  // grey+alpha PNG; alpha to be ignored) or grey (1); with mode=L always grey (the luma of a
  // colour image). io.dst is not used. The same errors as ApplyVariable.
  absl::StatusOr<transforms_internal::InterleavedU8Image> DecodeInterleaved(
      const SampleSpec& in, const SampleBuffers& io) const;
  uint32_t channels() const { return channels_; }
  // draft=True, not yet given its size (ParseTransforms replaces such an op before any chain
  // uses it; OutputSpec refuses one).
  bool draft_pending() const { return draft_pending_; }
  // The same op with a draft of height x width.
  std::unique_ptr<DecodeImage> WithDraft(uint32_t height, uint32_t width) const {
    auto op = std::make_unique<DecodeImage>(channels_, height, width);
    op->draft_from_next_op_ = draft_pending_;
    return op;
  }
  // The scale a JPEG of header's size decodes at: 1 without a draft.
  uint32_t JpegScale(const transforms_internal::JpegHeader& header) const;
  // The stored image's width x height, for a record this op decoded whole to
  // `decoded_pixels`: those, unless a draft reduced a JPEG (then its header's size).
  uint64_t StoredPixels(const void* src, size_t src_bytes, uint64_t decoded_pixels) const;

  // A window of a JPEG, decoded from only the iMCU rows and columns that cover it (issue 36;
  // transforms_internal::DecodeJpegWindow): the pixels DecodeInterleaved would give, cut to the
  // window `choose` picks from the image's declared height and width, bitwise. The header is
  // checked against `in`'s bound first, as DecodeInterleaved does. A PNG decodes its rows from
  // the first down to the window's last (all of them where it is interlaced), and the window
  // is a view into them (rows the image's width apart: row_bytes). Neither: nullopt (decode it
  // whole). `decoded_pixels` receives the area the decoder worked on, `stored_pixels` the
  // image's width x height.
  struct Window {
    transforms_internal::InterleavedU8Image image;
    uint64_t decoded_pixels = 0;
    uint64_t stored_pixels = 0;
  };
  // `window`'s pixels as this op's output: `channels()` u8 CHW planes at `dst` (a grey image's
  // plane repeated, alpha dropped), as ApplyVariable writes a whole image.
  SampleSpec SplitPlanes(const transforms_internal::InterleavedU8Image& window, void* dst) const;
  absl::StatusOr<std::optional<Window>> DecodeJpegWindow(
      const SampleSpec& in, const SampleBuffers& io,
      absl::FunctionRef<transforms_internal::PixelWindow(uint32_t height, uint32_t width)> choose)
      const;

 private:
  uint32_t channels_;          // 3 (RGB) or 1 (L)
  uint32_t draft_height_ = 0;  // PIL's draft size; 0 x 0: none
  uint32_t draft_width_ = 0;
  bool draft_pending_ = false;
  bool draft_from_next_op_ = false;  // draft=True, sized by WithDraft from the op after it
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_DECODE_IMAGE_H_
