// Encoded test images made in memory: PNG through libspng's encoder, JPEG through TurboJPEG.
#ifndef SLUICE_TESTS_PIPELINE_TRANSFORMS_ENCODED_IMAGES_H_
#define SLUICE_TESTS_PIPELINE_TRANSFORMS_ENCODED_IMAGES_H_

#include <spng.h>
#include <turbojpeg.h>

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

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_PIPELINE_TRANSFORMS_ENCODED_IMAGES_H_
