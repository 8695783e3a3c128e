#include "pipeline/transforms/internal/jpeg_window.h"

#include <turbojpeg.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

// jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/image_structure.h"

namespace sluice::transforms_internal {
namespace {

// libjpeg's error manager, as TurboJPEG's behaves in tjDecompress2 (so the messages are
// DecodeImage's): a warning (msg_level -1: corrupt entropy data, a premature end of the stream)
// is noted, its message kept if it is the first, and decoding goes on; an error longjmps back
// to DecodeRaw's setjmp with its message. The result is a failure if either happened, with the
// last message kept, and "warning" if any warning came first. Plain data only.
struct WindowErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  bool warning;  // a warning was emitted
  char message[JMSG_LENGTH_MAX];
};

WindowErrorManager* ErrorManagerOf(j_common_ptr cinfo) {
  // pub is the first member: libjpeg's usual way of extending its error manager.
  return reinterpret_cast<WindowErrorManager*>(cinfo->err);
}

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  WindowErrorManager* err = ErrorManagerOf(cinfo);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// libjpeg's default emit_message outputs only the first warning (at trace level 0), and
// TurboJPEG's output_message keeps what is output. Trace messages (msg_level >= 0) are ignored.
void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  WindowErrorManager* err = ErrorManagerOf(cinfo);
  if (!err->warning) (*cinfo->err->format_message)(cinfo, err->message);
  err->warning = true;
  ++cinfo->err->num_warnings;
}

void OutputMessage(j_common_ptr) {}  // a library prints nothing

// TJFLAG_LIMITSCANS's scan bound, with TurboJPEG's message (DecodeImage's full decode).
void LimitScans(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  if (reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number <= kMaxJpegScans) return;
  WindowErrorManager* err = ErrorManagerOf(cinfo);
  std::snprintf(err->message, sizeof(err->message), "Progressive JPEG image has more than %d scans",
                kMaxJpegScans);
  err->warning = false;  // an error, whatever came before
  std::longjmp(err->jump, 1);
}

enum class RawResult { kOk, kError, kWarning, kInternal };

// All of the libjpeg work. Its frame holds no C++ object with a destructor (nor does any frame
// libjpeg's handlers can longjmp across): the longjmp to the setjmp below would skip it.
// `window` is inside the image and `out` holds its pixels (checked by the caller).
RawResult DecodeRaw(const unsigned char* data, size_t size, const PixelWindow& window,
                    uint32_t pixel_bytes, uint32_t scale, uint8_t* out, uint64_t* pixels_decoded,
                    WindowErrorManager* err) {
  jpeg_decompress_struct cinfo{};  // zeroed: jpeg_destroy_decompress is safe at any jump
  jpeg_progress_mgr progress{};
  cinfo.err = jpeg_std_error(&err->pub);
  err->pub.error_exit = ErrorExit;
  err->pub.emit_message = EmitMessage;
  err->pub.output_message = OutputMessage;
  err->warning = false;
  err->message[0] = '\0';
  if (setjmp(err->jump) != 0) {
    jpeg_destroy_decompress(&cinfo);
    return err->warning ? RawResult::kWarning : RawResult::kError;
  }
  jpeg_create_decompress(&cinfo);
  progress.progress_monitor = LimitScans;
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  // tjDecompress2's settings with flags 0 (and TJPF_RGB / TJPF_GRAY): libjpeg's defaults.
  cinfo.out_color_space = pixel_bytes == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  // PIL's draft (JpegDecode.c): scale_num 1, scale_denom its scale, the rest as above; libjpeg
  // then uses its scaled accurate IDCTs (and may decode chroma at a larger scale instead of
  // upsampling it), as it does for PIL.
  cinfo.scale_num = 1;
  cinfo.scale_denom = scale;
  jpeg_start_decompress(&cinfo);                     // a multi-scan JPEG is read whole here
  const JDIMENSION full_width = cinfo.output_width;  // (scaled; the crop changes output_width)
  if (static_cast<uint32_t>(cinfo.output_components) != pixel_bytes) {
    jpeg_destroy_decompress(&cinfo);
    return RawResult::kInternal;
  }

  // The widest horizontal subsampling ratio (2 for 4:2:2 and 4:2:0, 4 for 4:1:1, 1 for none),
  // and whether a component is vertically subsampled.
  uint32_t chroma_width = 1;
  bool v_subsampled = false;
  for (int c = 0; c < cinfo.num_components; ++c) {
    const jpeg_component_info& comp = cinfo.comp_info[c];
    chroma_width = std::max<uint32_t>(chroma_width, cinfo.max_h_samp_factor / comp.h_samp_factor);
    v_subsampled |= comp.v_samp_factor < cinfo.max_v_samp_factor;
  }
  // Columns: the crop spans one chroma sample more than the window's on each side (where the
  // image has it). Why: the crop becomes the upsampler's whole row, so at the crop's edges fancy
  // h2v1/h2v2 upsampling replicates the edge chroma sample where the full decode blends in its
  // neighbour, and a window pixel blends its own chroma sample with the one on its nearer side.
  // Without this margin 4:2:2 and 4:2:0 windows (progressive and restart ones too) differ at
  // their left or right edge in jpeg_window_test; with it (or with a margin of a whole iMCU
  // column each side, tried first) every window of every kind is bitwise the full decode's. No
  // margin for 4:4:4, 4:4:0 and grey (no horizontal upsampling); 4:1:1 is upsampled by
  // replication in libjpeg-turbo 2.1.5, so its margin is only a precaution.
  // jpeg_crop_scanline then moves the left edge down to an iMCU column boundary (the IDCT works
  // in whole iMCU columns) and widens the crop to keep its right edge; the upsampler it keeps is
  // the one jpeg_start_decompress chose for the whole image's width.
  const uint64_t window_right = uint64_t{window.x} + window.width;
  uint64_t left = window.x;
  uint64_t right = window_right;
  if (chroma_width > 1) {
    left = window.x / chroma_width >= 1 ? (window.x / chroma_width - 1) * chroma_width : 0;
    right = std::min<uint64_t>(((window_right - 1) / chroma_width + 2) * chroma_width, full_width);
  }
  auto crop_x = static_cast<JDIMENSION>(left);
  auto crop_width = static_cast<JDIMENSION>(right - left);
  jpeg_crop_scanline(&cinfo, &crop_x, &crop_width);
  if (crop_x > window.x || uint64_t{crop_x} + crop_width < uint64_t{window.x} + window.width) {
    jpeg_destroy_decompress(&cinfo);
    return RawResult::kInternal;
  }
  // Rows: skip straight to the window's first row and stop after its last. No margin is needed
  // (a margin of one iMCU row above, tried first, made no difference in the test): where vertical
  // fancy upsampling (h2v2, h1v2) needs context rows, jpeg_skip_scanlines decodes the rows above
  // the target itself, and jpeg_read_scanlines decodes the iMCU row below the window before it
  // outputs the window's last rows, as in a full decode. One skip from row 0 starts on a row
  // group boundary (libjpeg-turbo issue 915, a skip from inside a row group, does not arise).
  if (window.y > 0 && jpeg_skip_scanlines(&cinfo, window.y) != window.y) {
    jpeg_destroy_decompress(&cinfo);
    return RawResult::kInternal;
  }
  JSAMPARRAY row = (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                              crop_width * pixel_bytes, 1);
  const size_t row_bytes = size_t{window.width} * pixel_bytes;
  const size_t skip_bytes = size_t{window.x - crop_x} * pixel_bytes;
  for (uint32_t r = 0; r < window.height; ++r) {
    if (jpeg_read_scanlines(&cinfo, row, 1) != 1) {  // a memory source never suspends
      jpeg_destroy_decompress(&cinfo);
      return RawResult::kInternal;
    }
    std::memcpy(out + r * row_bytes, row[0] + skip_bytes, row_bytes);
  }
  if (pixels_decoded != nullptr) {
    // The iMCU columns of the crop and the iMCU rows of the window, with one more above and below
    // where fancy upsampling reads them as context: the blocks that go through the IDCT.
    const auto imcu_width =
        static_cast<uint32_t>(cinfo.max_h_samp_factor * cinfo.min_DCT_scaled_size);
    const auto imcu_height =
        static_cast<uint32_t>(cinfo.max_v_samp_factor * cinfo.min_DCT_scaled_size);
    // (full_width: since jpeg_crop_scanline, output_width is the crop's.)
    const uint64_t crop_right = std::min<uint64_t>(
        (uint64_t{crop_x} + crop_width + imcu_width - 1) / imcu_width * imcu_width, full_width);
    const uint32_t context = v_subsampled ? imcu_height : 0;
    const uint32_t top_aligned = window.y / imcu_height * imcu_height;
    const uint32_t top = top_aligned > context ? top_aligned - context : 0;
    const uint64_t bottom = std::min<uint64_t>(
        (uint64_t{window.y} + window.height + imcu_height - 1) / imcu_height * imcu_height +
            context,
        cinfo.output_height);
    *pixels_decoded = (bottom - top) * (crop_right - crop_x);
  }
  // A window down to the last row reads the stream to its EOI as tjDecompress2 does (cheap: the
  // entropy-coded data is all consumed), so it sees the same trailing damage (garbage before the
  // EOI is a warning). Otherwise the rest of the stream is not read, nor checked.
  if (cinfo.output_scanline == cinfo.output_height) jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return err->warning ? RawResult::kWarning : RawResult::kOk;
}

}  // namespace

absl::StatusOr<JpegHeader> ReadJpegHeader(absl::string_view jpeg) {
  // A TurboJPEG decompressor of its own (decode_image.cc says why one is never kept).
  const std::unique_ptr<void, int (*)(tjhandle)> tj(tjInitDecompress(), tjDestroy);
  if (tj == nullptr) return absl::InternalError("tjInitDecompress failed");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), reinterpret_cast<const unsigned char*>(jpeg.data()),
                          static_cast<unsigned long>(jpeg.size()), &width, &height, &subsamp,
                          &colorspace) != 0) {
    return absl::DataLossError(absl::StrCat("corrupt JPEG header: ", tjGetErrorStr2(tj.get())));
  }
  if (width < 1 || height < 1) {  // decode_image.cc's CheckBound
    return absl::DataLossError(
        absl::StrCat("corrupt JPEG: it declares ", width, "x", height, " pixels"));
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return absl::DataLossError("CMYK JPEG; expected a grey or colour (YCbCr/RGB) JPEG");
  }
  return JpegHeader{static_cast<uint32_t>(width), static_cast<uint32_t>(height),
                    colorspace == TJCS_GRAY ? 1u : 3u};
}

uint32_t DraftScale(const JpegHeader& header, uint32_t height, uint32_t width) {
  if (height == 0 || width == 0) return 1;
  const uint32_t fit = std::min(header.width / width, header.height / height);
  for (const uint32_t s : {8u, 4u, 2u}) {
    if (fit >= s) return s;
  }
  return 1;
}

JpegHeader ScaledHeader(const JpegHeader& header, uint32_t scale) {
  // libjpeg's jdiv_round_up(image_width * scale_num, scale_denom), PIL's (size + s - 1) // s.
  return JpegHeader{(header.width + scale - 1) / scale, (header.height + scale - 1) / scale,
                    header.pixel_bytes};
}

size_t JpegWindowBytes(const PixelWindow& window, uint32_t pixel_bytes) {
  return size_t{window.width} * window.height * pixel_bytes + kInterleavedReadPadding;
}

absl::StatusOr<InterleavedU8Image> DecodeJpegWindow(absl::string_view jpeg,
                                                    const PixelWindow& window, uint8_t* out,
                                                    size_t out_capacity, uint64_t* pixels_decoded,
                                                    uint32_t scale) {
  if (scale != 1 && scale != 2 && scale != 4 && scale != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG decode scale 1/", scale, "; expected 1/1, 1/2, 1/4 or 1/8"));
  }
  ASSIGN_OR_RETURN(const JpegHeader stored, ReadJpegHeader(jpeg));
  const JpegHeader header = ScaledHeader(stored, scale);
  if (window.width == 0 || window.height == 0 || uint64_t{window.x} + window.width > header.width ||
      uint64_t{window.y} + window.height > header.height) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JPEG window of ", window.width, "x", window.height, " pixels at column ", window.x,
        ", row ", window.y, " is not inside the ", header.width, "x", header.height,
        " image (width x height", scale == 1 ? "" : absl::StrCat(", decoded at 1/", scale),
        "); expected a non-empty window inside it"));
  }
  const size_t needed = JpegWindowBytes(window, header.pixel_bytes);
  if (out == nullptr || out_capacity < needed) {
    return absl::InvalidArgumentError(absl::StrCat("JPEG window output buffer of ", out_capacity,
                                                   " bytes; the window needs ", needed));
  }
  // A scan bomb is refused before decoding, as DecodeImage does.
  if (absl::Status scans = CheckJpegScanCount(jpeg); !scans.ok()) {
    return absl::DataLossError(scans.message());
  }
  WindowErrorManager err;
  switch (DecodeRaw(reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(), window,
                    header.pixel_bytes, scale, out, pixels_decoded, &err)) {
    case RawResult::kOk:
      return InterleavedU8Image{out, window.height, window.width, header.pixel_bytes,
                                size_t{window.width} * header.pixel_bytes};
    case RawResult::kWarning:
      return absl::DataLossError(absl::StrCat("damaged or truncated JPEG: ", err.message));
    case RawResult::kError:
      return absl::DataLossError(absl::StrCat("corrupt JPEG: ", err.message));
    case RawResult::kInternal:
      break;
  }
  return absl::InternalError(
      "libjpeg did not decode the JPEG window as planned (crop, skip or read fell short)");
}

}  // namespace sluice::transforms_internal
