#include "pipeline/transforms/decode_image.h"

#include <spng.h>
#include <turbojpeg.h>

#include <cstring>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/image_structure.h"

namespace sluice {
namespace {
constexpr unsigned char kJpegMagic[] = {0xff, 0xd8, 0xff};
constexpr unsigned char kPngMagic[] = {0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a};

bool StartsWith(const SampleBuffers& io, const unsigned char* magic, size_t n) {
  return io.src_bytes >= n && std::memcmp(io.src, magic, n) == 0;
}

// A TurboJPEG decompressor of its own for each JPEG. A kept one keeps the last image's
// quantization and Huffman tables, and libjpeg uses them for a JPEG that defines none (an
// abbreviated stream): a JPEG without DQT, refused alone (and by PIL), decoded with the
// previous image's tables; a Motion-JPEG frame without DHT, which libjpeg-turbo decodes with
// the standard tables, was refused after a JPEG with optimized ones (a hostile-input trial).
struct JpegDecompressor {
  tjhandle h = tjInitDecompress();
  JpegDecompressor() = default;
  JpegDecompressor(const JpegDecompressor&) = delete;
  JpegDecompressor& operator=(const JpegDecompressor&) = delete;
  ~JpegDecompressor() {
    if (h != nullptr) tjDestroy(h);
  }
};

absl::Status CheckBound(const char* format, int64_t width, int64_t height, const SampleSpec& in) {
  if (width < 1 || height < 1) {
    return absl::DataLossError(
        absl::StrCat("corrupt ", format, ": it declares ", width, "x", height, " pixels"));
  }
  if (width > in.width || height > in.height) {
    return absl::DataLossError(absl::StrCat(
        format, " declares ", width, "x", height, " pixels (width x height), over the bound of ",
        in.width, "x", in.height, "; refused before decoding (a decompression bomb?)"));
  }
  // The scratch holds the largest area (the split's max_pixels), which may be less than the
  // box of the largest width and the largest height.
  if (static_cast<uint64_t>(width) * static_cast<uint64_t>(height) > in.plane_values()) {
    return absl::DataLossError(absl::StrCat(
        format, " declares ", width, "x", height, " = ", width * height,
        " pixels, over the bound of ", in.plane_values(),
        " pixels (the split's largest image by area); refused before decoding (a decompression "
        "bomb?)"));
  }
  return absl::OkStatus();
}

// PIL's rgb2l: L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16.
uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// `pixels` interleaved RGB pixels of `stride` bytes to their luma, in place (pixel i's luma
// lands at byte i, at or before the pixel it is read from).
void LumaInPlace(uint8_t* px, size_t pixels, size_t stride) {
  for (size_t i = 0; i < pixels; ++i) px[i] = Luma(px + i * stride);
}

// `pixels` interleaved RGB pixels of `stride` bytes to three CHW planes.
void SplitChannels(const uint8_t* in, size_t pixels, size_t stride, uint8_t* out) {
  uint8_t* r = out;
  uint8_t* g = out + pixels;
  uint8_t* b = out + 2 * pixels;
  for (size_t i = 0; i < pixels; ++i, in += stride) {
    r[i] = in[0];
    g[i] = in[1];
    b[i] = in[2];
  }
}

transforms_internal::InterleavedU8Image Interleaved(const uint8_t* px, uint32_t height,
                                                    uint32_t width, uint32_t pixel_bytes) {
  return transforms_internal::InterleavedU8Image{px, height, width, pixel_bytes,
                                                 size_t{width} * pixel_bytes};
}

absl::StatusOr<transforms_internal::InterleavedU8Image> DecodeJpeg(const SampleSpec& in,
                                                                   const SampleBuffers& io) {
  const JpegDecompressor decompressor;
  tjhandle tj = decompressor.h;
  if (tj == nullptr) return absl::InternalError("tjInitDecompress failed");
  const auto* src = static_cast<const unsigned char*>(io.src);
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, src, io.src_bytes, &width, &height, &subsamp, &colorspace) != 0) {
    absl::Status corrupt =
        absl::DataLossError(absl::StrCat("corrupt JPEG header: ", tjGetErrorStr2(tj)));
    return corrupt;
  }
  RETURN_IF_ERROR(CheckBound("JPEG", width, height, in));
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return absl::DataLossError("CMYK JPEG; expected a grey or colour (YCbCr/RGB) JPEG");
  }
  // A scan bomb is refused before decoding (counting a progressive JPEG's scans is cheap;
  // TJFLAG_LIMITSCANS below stops one only after 500 passes over the image).
  if (absl::Status scans =
          CheckJpegScanCount(absl::string_view(static_cast<const char*>(io.src), io.src_bytes));
      !scans.ok()) {
    return absl::DataLossError(scans.message());
  }
  const bool grey = colorspace == TJCS_GRAY;
  auto* target = static_cast<uint8_t*>(io.op_scratch);
  // Accurate integer IDCT and fancy upsampling, libjpeg's (and PIL's) defaults; at most
  // kMaxJpegScans scans (TJFLAG_LIMITSCANS: libjpeg-turbo's bound, 500), against scan bombs.
  static_assert(kMaxJpegScans == 500, "TJFLAG_LIMITSCANS allows 500 scans");
  if (tjDecompress2(tj, src, io.src_bytes, target, width, 0, height, grey ? TJPF_GRAY : TJPF_RGB,
                    TJFLAG_LIMITSCANS) != 0) {
    const bool warning = tjGetErrorCode(tj) == TJERR_WARNING;
    return absl::DataLossError(absl::StrCat(
        warning ? "damaged or truncated JPEG: " : "corrupt JPEG: ", tjGetErrorStr2(tj)));
  }
  return Interleaved(target, static_cast<uint32_t>(height), static_cast<uint32_t>(width),
                     grey ? 1 : 3);
}

absl::Status SpngError(const char* what, int err) {
  if (err == SPNG_ECHUNK_LIMITS) {
    return absl::DataLossError(absl::StrCat(
        "PNG metadata chunks (tEXt, zTXt, iTXt, iCCP, eXIf, sPLT) over the decoder's bound (",
        kPngDecoderChunkLimit, " bytes inflated in one, ", kPngDecoderCacheLimit,
        " in all, at most ", kMaxPngMetadataChunks, " chunks); refused (a decompression bomb?)"));
  }
  return absl::DataLossError(absl::StrCat(what, ": ", spng_strerror(err)));
}

// Decodes the PNG at io.src into io.op_scratch: every row, or with `choose` (called with the
// header's height and width), only the rows down to the last of the window it returns (a
// non-interlaced PNG's rows come in order; an interlaced one decodes whole), and `window` gets
// that window. `rows_decoded` receives the rows decoded.
absl::StatusOr<transforms_internal::InterleavedU8Image> DecodePngRows(
    const SampleSpec& in, const SampleBuffers& io,
    const std::function<transforms_internal::PixelWindow(uint32_t, uint32_t)>* choose,
    transforms_internal::PixelWindow* window, uint32_t* rows_decoded) {
  // libspng 0.7 has no way to reset a context: one per image.
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(0), spng_ctx_free);
  if (ctx == nullptr) return absl::InternalError("spng_ctx_new failed");
  // Metadata chunks (zTXt, iTXt, iCCP are inflated by libspng as it reads them) are bounded:
  // a decompression bomb in one stops at kPngDecoderChunkLimit (libspng's default is 4 GiB).
  int err = spng_set_chunk_limits(ctx.get(), kPngDecoderChunkLimit, kPngDecoderCacheLimit);
  if (err != 0) return SpngError("spng_set_chunk_limits", err);
  err = spng_set_png_buffer(ctx.get(), io.src, io.src_bytes);
  if (err != 0) return SpngError("corrupt PNG", err);
  spng_ihdr ihdr{};
  err = spng_get_ihdr(ctx.get(), &ihdr);
  if (err != 0) return SpngError("corrupt PNG header", err);
  RETURN_IF_ERROR(CheckBound("PNG", ihdr.width, ihdr.height, in));
  if (ihdr.bit_depth > 8) {
    return absl::DataLossError(
        absl::StrCat("PNG of ", int{ihdr.bit_depth}, " bits per sample; expected 8 or fewer"));
  }
  const size_t pixels = size_t{ihdr.width} * ihdr.height;
  auto* target = static_cast<uint8_t*>(io.op_scratch);
  int fmt = SPNG_FMT_RGB8;
  uint32_t stride = 3;
  if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE) {
    fmt = SPNG_FMT_G8;
    stride = 1;
  } else if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA) {
    // libspng 0.7 expands grey+alpha only to RGBA8 (R = G = B = grey), whose luma is the grey.
    fmt = SPNG_FMT_RGBA8;
    stride = 4;
  }
  if (ihdr.color_type == SPNG_COLOR_TYPE_INDEXED) {
    // PIL pads a short palette with a grey ramp: index i past the PLTE's entries is (i, i, i).
    // libspng would give (0, 0, 0).
    spng_plte plte{};
    err = spng_get_plte(ctx.get(), &plte);
    if (err != 0) return SpngError("corrupt PNG palette", err);
    const uint32_t entries = uint32_t{1} << ihdr.bit_depth;
    if (plte.n_entries < entries) {
      for (uint32_t i = plte.n_entries; i < entries; ++i) {
        const auto v = static_cast<uint8_t>(i);
        plte.entries[i] = spng_plte_entry{v, v, v, 255};
      }
      plte.n_entries = entries;
      err = spng_set_plte(ctx.get(), &plte);
      if (err != 0) return SpngError("corrupt PNG palette", err);
    }
  }
  uint32_t rows = ihdr.height;
  if (choose != nullptr) {
    *window = (*choose)(ihdr.height, ihdr.width);
    if (ihdr.interlace_method == SPNG_INTERLACE_NONE) rows = window->y + window->height;
  }
  *rows_decoded = rows;
  if (rows == ihdr.height) {
    err = spng_decode_image(ctx.get(), target, pixels * stride, fmt, 0);
    if (err != 0) return SpngError("corrupt or truncated PNG", err);
  } else {
    // Row by row, stopping after the window's last: the rows below it are not read (nor is
    // damage there seen; ingestion's structure check reads the whole file).
    err = spng_decode_image(ctx.get(), nullptr, 0, fmt, SPNG_DECODE_PROGRESSIVE);
    if (err != 0) return SpngError("corrupt or truncated PNG", err);
    const size_t row_bytes = size_t{ihdr.width} * stride;
    for (uint32_t r = 0; r < rows; ++r) {
      err = spng_decode_row(ctx.get(), target + r * row_bytes, row_bytes);
      if (err != 0 && !(err == SPNG_EOI && r + 1 == ihdr.height)) {
        return SpngError("corrupt or truncated PNG", err);
      }
    }
  }
  return Interleaved(target, ihdr.height, ihdr.width, stride);  // alpha, if any, is ignored
}

absl::StatusOr<transforms_internal::InterleavedU8Image> DecodePng(const SampleSpec& in,
                                                                  const SampleBuffers& io) {
  transforms_internal::PixelWindow unused;
  uint32_t rows = 0;
  return DecodePngRows(in, io, nullptr, &unused, &rows);
}
}  // namespace

absl::StatusOr<std::unique_ptr<Transform>> DecodeImage::FromArgs(const TransformArgs& args) {
  ASSIGN_OR_RETURN(const std::string mode, args.Name("mode", "RGB"));
  std::string upper = absl::AsciiStrToUpper(mode);
  if (absl::StartsWith(upper, "IMAGEREADMODE.")) upper = upper.substr(14);
  uint32_t channels = 0;
  if (upper == "RGB") channels = 3;
  if (upper == "L" || upper == "GRAY") channels = 1;
  if (channels == 0) return args.Wrong("mode", "RGB or L (grey)");
  if (!args.Has("draft")) return std::make_unique<DecodeImage>(channels);
  constexpr char kDraftValues[] =
      "False, True (the size of the Resize, RandomResizedCrop or CenterCrop after it), or a "
      "requested size: an int or (h, w), positive";
  if (absl::StatusOr<bool> on = args.Bool("draft", std::nullopt); on.ok()) {
    auto op = std::make_unique<DecodeImage>(channels);
    op->draft_pending_ = *on;
    return op;
  }
  absl::StatusOr<std::vector<int64_t>> size = args.Ints("draft", {1, 2}, std::nullopt);
  if (!size.ok()) return args.Wrong("draft", kDraftValues);
  const int64_t h = (*size)[0], w = size->back();
  if (h < 1 || w < 1 || h > UINT32_MAX || w > UINT32_MAX) return args.Wrong("draft", kDraftValues);
  return std::make_unique<DecodeImage>(channels, static_cast<uint32_t>(h),
                                       static_cast<uint32_t>(w));
}

std::string DecodeImage::Identity() const {
  std::string draft;
  if (draft_pending_) draft = ", draft=True";
  if (draft_height_ > 0) {
    draft = absl::StrCat(", draft=(", draft_height_, ", ", draft_width_, ")");
  }
  return absl::StrCat(kName, "(mode=", channels_ == 3 ? "RGB" : "L", draft, ")");
}

std::string DecodeImage::EvalForm() const {
  if (!draft_from_next_op_) return Identity();
  return absl::StrCat(kName, "(mode=", channels_ == 3 ? "RGB" : "L", ", draft=True)");
}

uint32_t DecodeImage::JpegScale(const transforms_internal::JpegHeader& header) const {
  if (draft_height_ == 0) return 1;
  return transforms_internal::DraftScale(header, draft_height_, draft_width_);
}

uint64_t DecodeImage::StoredPixels(const void* src, size_t src_bytes,
                                   uint64_t decoded_pixels) const {
  if (draft_height_ == 0 || src_bytes < sizeof(kJpegMagic) ||
      std::memcmp(src, kJpegMagic, sizeof(kJpegMagic)) != 0) {
    return decoded_pixels;
  }
  const absl::StatusOr<transforms_internal::JpegHeader> header =
      transforms_internal::ReadJpegHeader(
          absl::string_view(static_cast<const char*>(src), src_bytes));
  return header.ok() ? uint64_t{header->width} * header->height : decoded_pixels;
}

absl::StatusOr<SampleSpec> DecodeImage::OutputSpec(const SampleSpec& in) const {
  if (in.extent != SampleExtent::kEncoded) {
    return absl::InvalidArgumentError(
        absl::StrCat("DecodeImage: expected encoded images (a dataset of JPEG or PNG records, "
                     "and DecodeImage first), got ",
                     SampleSpecString(in)));
  }
  if (in.height == 0 || in.width == 0) {
    return absl::InvalidArgumentError("DecodeImage: expected a positive bound on image sizes");
  }
  if (draft_pending_) {
    return absl::InvalidArgumentError(
        "DecodeImage(draft=True): no size to draft to; expected a Resize, RandomResizedCrop or "
        "CenterCrop after it, or draft=size");
  }
  SampleSpec out{ElementType::kU8, channels_,          in.height,
                 in.width,         SampleLayout::kCHW, SampleExtent::kVariable};
  out.max_pixels = in.max_pixels;  // the decoded image's area bound is the record's
  return out;
}

void DecodeImage::Apply(const SampleSpec&, const void*, void*, SampleRandom&) const {}

size_t DecodeImage::ScratchBytes(const SampleSpec& bound) const {
  return size_t{4} * bound.plane_values() + transforms_internal::kInterleavedReadPadding;
}

absl::StatusOr<transforms_internal::InterleavedU8Image> DecodeImage::DecodeInterleaved(
    const SampleSpec& in, const SampleBuffers& io) const {
  if (io.src_bytes == 0) {
    return absl::DataLossError("empty record (0 bytes); expected a JPEG or PNG image");
  }
  absl::StatusOr<transforms_internal::InterleavedU8Image> image;
  if (draft_height_ > 0 && StartsWith(io, kJpegMagic, sizeof(kJpegMagic))) {
    // A draft: the whole image at its reduced scale, through libjpeg's API as PIL decodes it
    // (DecodeJpegWindow does the luma for mode=L).
    const auto everything = [](uint32_t height, uint32_t width) {
      return transforms_internal::PixelWindow{0, 0, width, height};
    };
    ASSIGN_OR_RETURN(std::optional<Window> whole, DecodeJpegWindow(in, io, everything));
    return whole->image;
  }
  if (StartsWith(io, kJpegMagic, sizeof(kJpegMagic))) {
    image = DecodeJpeg(in, io);
  } else if (StartsWith(io, kPngMagic, sizeof(kPngMagic))) {
    image = DecodePng(in, io);
  } else {
    const auto* b = static_cast<const unsigned char*>(io.src);
    std::string head;
    for (size_t i = 0; i < io.src_bytes && i < 8; ++i) absl::StrAppendFormat(&head, " %02x", b[i]);
    return absl::DataLossError(
        absl::StrCat("not a JPEG (ff d8 ff) or PNG (89 50 4e 47 0d 0a 1a 0a)", " image: its ",
                     io.src_bytes, " bytes start with", head));
  }
  if (image.ok() && channels_ == 1 && image->pixel_bytes != 1) {
    auto* px = static_cast<uint8_t*>(io.op_scratch);
    LumaInPlace(px, size_t{image->height} * image->width, image->pixel_bytes);
    *image = Interleaved(px, image->height, image->width, 1);
  }
  return image;
}

absl::StatusOr<std::optional<DecodeImage::Window>> DecodeImage::DecodeJpegWindow(
    const SampleSpec& in, const SampleBuffers& io,
    absl::FunctionRef<transforms_internal::PixelWindow(uint32_t height, uint32_t width)> choose)
    const {
  if (StartsWith(io, kPngMagic, sizeof(kPngMagic))) {
    // A PNG decodes whole rows, from the first down to the window's last; the window is a view
    // into them (rows the image's width apart).
    const std::function<transforms_internal::PixelWindow(uint32_t, uint32_t)> pick =
        [&](uint32_t height, uint32_t width) { return choose(height, width); };
    transforms_internal::PixelWindow window;
    uint32_t rows = 0;
    ASSIGN_OR_RETURN(const transforms_internal::InterleavedU8Image image,
                     DecodePngRows(in, io, &pick, &window, &rows));
    if (window.width == 0 || window.height == 0 ||
        uint64_t{window.x} + window.width > image.width ||
        uint64_t{window.y} + window.height > image.height) {
      return absl::InvalidArgumentError("PNG window not inside the image");
    }
    Window w;
    w.decoded_pixels = uint64_t{rows} * image.width;
    w.stored_pixels = uint64_t{image.width} * image.height;
    auto* first = const_cast<uint8_t*>(image.pixels) + size_t{window.y} * image.row_bytes +
                  size_t{window.x} * image.pixel_bytes;
    w.image = transforms_internal::InterleavedU8Image{first, window.height, window.width,
                                                      image.pixel_bytes, image.row_bytes};
    if (channels_ == 1 && w.image.pixel_bytes != 1) {
      // Each row's luma at the row's start: the view keeps its row stride, 1 byte a pixel.
      for (uint32_t r = 0; r < w.image.height; ++r) {
        LumaInPlace(first + r * image.row_bytes, w.image.width, w.image.pixel_bytes);
      }
      w.image.pixel_bytes = 1;
    }
    return w;
  }
  if (!StartsWith(io, kJpegMagic, sizeof(kJpegMagic))) return std::nullopt;
  const absl::string_view jpeg(static_cast<const char*>(io.src), io.src_bytes);
  ASSIGN_OR_RETURN(const transforms_internal::JpegHeader header,
                   transforms_internal::ReadJpegHeader(jpeg));
  RETURN_IF_ERROR(CheckBound("JPEG", header.width, header.height, in));
  const uint32_t scale = JpegScale(header);
  const transforms_internal::JpegHeader decoded = transforms_internal::ScaledHeader(header, scale);
  const transforms_internal::PixelWindow window = choose(decoded.height, decoded.width);
  Window w;
  auto* px = static_cast<uint8_t*>(io.op_scratch);
  ASSIGN_OR_RETURN(w.image, transforms_internal::DecodeJpegWindow(
                                jpeg, window, px, ScratchBytes(in), &w.decoded_pixels, scale));
  w.stored_pixels = uint64_t{header.width} * header.height;
  if (channels_ == 1 && w.image.pixel_bytes != 1) {
    LumaInPlace(px, size_t{w.image.height} * w.image.width, w.image.pixel_bytes);
    w.image = Interleaved(px, w.image.height, w.image.width, 1);
  }
  return w;
}

absl::StatusOr<SampleSpec> DecodeImage::ApplyVariable(const SampleSpec& in, const SampleBuffers& io,
                                                      SampleRandom&) const {
  ASSIGN_OR_RETURN(const transforms_internal::InterleavedU8Image image, DecodeInterleaved(in, io));
  return SplitPlanes(image, io.dst);
}

SampleSpec DecodeImage::SplitPlanes(const transforms_internal::InterleavedU8Image& image,
                                    void* dst) const {
  const size_t pixels = size_t{image.height} * image.width;
  auto* out = static_cast<uint8_t*>(dst);
  const size_t packed = size_t{image.width} * image.pixel_bytes;
  if (image.row_bytes != packed && image.height > 1) {
    // A view with rows further apart (a PNG window): row by row.
    const size_t w = image.width;
    for (uint32_t r = 0; r < image.height; ++r) {
      const uint8_t* row = image.pixels + r * image.row_bytes;
      if (image.pixel_bytes == 1) {
        for (uint32_t c = 0; c < channels_; ++c) std::memcpy(out + c * pixels + r * w, row, w);
      } else {
        for (size_t i = 0; i < w; ++i) {
          for (uint32_t c = 0; c < channels_; ++c) {
            out[c * pixels + r * w + i] = row[i * image.pixel_bytes + c];
          }
        }
      }
    }
  } else if (image.pixel_bytes == 1) {
    for (uint32_t c = 0; c < channels_; ++c) std::memcpy(out + c * pixels, image.pixels, pixels);
  } else {
    SplitChannels(image.pixels, pixels, image.pixel_bytes, out);
  }
  return SampleSpec{ElementType::kU8, channels_, image.height, image.width, SampleLayout::kCHW};
}

}  // namespace sluice
