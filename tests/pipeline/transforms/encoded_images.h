// Encoded test images made in memory: PNG through libspng's encoder, JPEG through TurboJPEG.
#ifndef SLUICE_TESTS_PIPELINE_TRANSFORMS_ENCODED_IMAGES_H_
#define SLUICE_TESTS_PIPELINE_TRANSFORMS_ENCODED_IMAGES_H_

#include <spng.h>
#include <turbojpeg.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sluice::testing {

// An 8-bit PNG of `color_type` (SPNG_COLOR_TYPE_*) from interleaved pixels; for an indexed
// one, `palette` holds the RGB entries and `pixels` the indices.
inline std::string EncodePng(uint32_t width, uint32_t height, uint8_t color_type,
                             const std::vector<uint8_t>& pixels,
                             const std::vector<uint8_t>& palette = {}) {
  spng_ctx* ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = width;
  ihdr.height = height;
  ihdr.bit_depth = 8;
  ihdr.color_type = color_type;
  spng_set_ihdr(ctx, &ihdr);
  if (!palette.empty()) {
    spng_plte plte{};
    plte.n_entries = static_cast<uint32_t>(palette.size() / 3);
    for (uint32_t i = 0; i < plte.n_entries; ++i) {
      plte.entries[i] = {palette[3 * i], palette[3 * i + 1], palette[3 * i + 2], 0};
    }
    spng_set_plte(ctx, &plte);
  }
  std::string out;
  if (spng_encode_image(ctx, pixels.data(), pixels.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE) ==
      0) {
    size_t len = 0;
    int err = 0;
    void* buf = spng_get_png_buffer(ctx, &len, &err);
    out.assign(static_cast<char*>(buf), len);
    free(buf);
  }
  spng_ctx_free(ctx);
  return out;
}

// A baseline JPEG of interleaved RGB (channels 3) or grey (channels 1) pixels.
inline std::string EncodeJpeg(uint32_t width, uint32_t height, int channels,
                              const std::vector<uint8_t>& pixels, int quality = 90) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  std::string out;
  if (tjCompress2(tj, pixels.data(), static_cast<int>(width), 0, static_cast<int>(height),
                  channels == 3 ? TJPF_RGB : TJPF_GRAY, &buf, &len,
                  channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, 0) == 0) {
    out.assign(reinterpret_cast<char*>(buf), len);
  }
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// Deterministic interleaved test pixels: a gradient with texture.
inline std::vector<uint8_t> TestPixels(uint32_t width, uint32_t height, int channels) {
  std::vector<uint8_t> p(size_t{width} * height * channels);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 2654435761u) >> 24);
  return p;
}

// `png` with a chunk of `type` holding `data` inserted after its IHDR (with its CRC).
inline std::string WithChunkAfterIhdr(const std::string& png, const std::string& type,
                                      const std::string& data) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  const std::string body = type + data;
  const auto crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
  constexpr size_t kAfterIhdr = 8 + 12 + 13;  // signature, IHDR
  return png.substr(0, kAfterIhdr) + be32(static_cast<uint32_t>(data.size())) + body + be32(crc) +
         png.substr(kAfterIhdr);
}

// A zlib stream (as in zTXt, iTXt, iCCP) inflating to `bytes` zero bytes.
inline std::string ZlibOfZeros(size_t bytes) {
  z_stream zs{};
  deflateInit(&zs, 9);
  const std::vector<unsigned char> zeros(1 << 20, 0);
  std::string out;
  std::vector<unsigned char> buf(1 << 16);
  size_t left = bytes;
  int flush = Z_NO_FLUSH;
  do {
    const size_t n = left < zeros.size() ? left : zeros.size();
    left -= n;
    zs.next_in = const_cast<unsigned char*>(zeros.data());
    zs.avail_in = static_cast<uInt>(n);
    flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
    do {
      zs.next_out = buf.data();
      zs.avail_out = static_cast<uInt>(buf.size());
      deflate(&zs, flush);
      out.append(reinterpret_cast<char*>(buf.data()), buf.size() - zs.avail_out);
    } while (zs.avail_out == 0);
  } while (flush != Z_FINISH);
  deflateEnd(&zs);
  return out;
}

// A progressive JPEG (TurboJPEG) whose last scan, with the tables before it, is repeated
// `repeats` times more before its EOI: a "scan bomb" of about (its scans + repeats) scans.
inline std::string ProgressiveJpegWithRepeatedScan(uint32_t width, uint32_t height, int repeats) {
  const std::vector<uint8_t> pixels(size_t{width} * height, 128);
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  std::string jpeg;
  if (tjCompress2(tj, pixels.data(), static_cast<int>(width), 0, static_cast<int>(height),
                  TJPF_GRAY, &buf, &len, TJSAMP_GRAY, 90, TJFLAG_PROGRESSIVE) == 0) {
    jpeg.assign(reinterpret_cast<char*>(buf), len);
  }
  tjFree(buf);
  tjDestroy(tj);
  const size_t last_scan = jpeg.rfind("\xFF\xDA");
  const size_t tables = jpeg.rfind("\xFF\xC4", last_scan);
  // The DHT just before the last scan, if it is right before it, goes with it.
  const size_t start =
      tables != std::string::npos && tables + 4 <= last_scan &&
              tables + 2 + ((uint8_t(jpeg[tables + 2]) << 8) | uint8_t(jpeg[tables + 3])) ==
                  last_scan
          ? tables
          : last_scan;
  const size_t eoi = jpeg.size() - 2;
  const std::string scan = jpeg.substr(start, eoi - start);
  std::string out = jpeg.substr(0, eoi);
  for (int i = 0; i < repeats; ++i) out += scan;
  return out + jpeg.substr(eoi);
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_PIPELINE_TRANSFORMS_ENCODED_IMAGES_H_
