#include "pipeline/transforms/internal/jpeg_window.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <vector>

// jpeglib.h uses FILE and size_t without including their headers.
#include <jpeglib.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/decode_image.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice::transforms_internal {
namespace {
using ::sluice::testing::ProgressiveJpegWithRepeatedScan;
using ::testing::HasSubstr;

// One kind of JPEG: its channels, the luma sampling factors (chroma is 1x1), progressive or
// not, and a restart marker every `restart_rows` MCU rows (0: none).
struct JpegKind {
  const char* name;
  int channels;
  int h_samp;
  int v_samp;
  bool progressive;
  int restart_rows;
};

constexpr JpegKind kKinds[] = {
    {"444", 3, 1, 1, false, 0},           {"422", 3, 2, 1, false, 0},
    {"420", 3, 2, 2, false, 0},           {"440", 3, 1, 2, false, 0},
    {"411", 3, 4, 1, false, 0},           {"grey", 1, 1, 1, false, 0},
    {"progressive420", 3, 2, 2, true, 0}, {"restart420", 3, 2, 2, false, 1},
    {"restart422", 3, 2, 1, false, 2},
};

void PrintTo(const JpegKind& kind, std::ostream* os) { *os << kind.name; }

// Sizes that are not multiples of any MCU, and degenerate ones.
constexpr uint32_t kSizes[][2] = {{37, 29}, {333, 250}, {1, 1},   {17, 1}, {1, 23},
                                  {64, 48}, {100, 3},   {35, 35}, {2, 5}};

// A JPEG through libjpeg's compress API (TurboJPEG cannot write restart markers).
std::string EncodeWithLibjpeg(uint32_t width, uint32_t height, const JpegKind& kind,
                              const std::vector<uint8_t>& pixels) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr jerr{};
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  jpeg_mem_dest(&cinfo, &buf, &len);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = kind.channels;
  cinfo.in_color_space = kind.channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 90, TRUE);
  if (kind.channels == 3) {
    cinfo.comp_info[0].h_samp_factor = kind.h_samp;
    cinfo.comp_info[0].v_samp_factor = kind.v_samp;
    for (int c = 1; c < 3; ++c) {
      cinfo.comp_info[c].h_samp_factor = 1;
      cinfo.comp_info[c].v_samp_factor = 1;
    }
  }
  if (kind.progressive) jpeg_simple_progression(&cinfo);
  cinfo.restart_in_rows = kind.restart_rows;
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    auto* row = const_cast<JSAMPROW>(&pixels[size_t{cinfo.next_scanline} * width * kind.channels]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buf), len);
  std::free(buf);
  jpeg_destroy_compress(&cinfo);
  return out;
}

// Smooth waves plus noise: chroma that varies both slowly and from pixel to pixel.
std::vector<uint8_t> SmoothAndNoisyPixels(uint32_t width, uint32_t height, int channels,
                                          std::mt19937& rng) {
  std::vector<uint8_t> px(size_t{width} * height * channels);
  std::uniform_int_distribution<int> noise(-40, 40);
  for (uint32_t y = 0; y < height; ++y) {
    for (uint32_t x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const double wave = 100.0 * std::sin(x * 0.11 + c * 2.0) * std::cos(y * 0.07 - c);
        px[(size_t{y} * width + x) * channels + c] =
            static_cast<uint8_t>(std::clamp(128 + static_cast<int>(wave) + noise(rng), 0, 255));
      }
    }
  }
  return px;
}

// DecodeImage's full decode (tjDecompress2, flags as decode_image.cc's).
std::vector<uint8_t> FullDecode(const std::string& jpeg, uint32_t width, uint32_t height,
                                int channels) {
  std::vector<uint8_t> out(size_t{width} * height * channels);
  tjhandle tj = tjInitDecompress();
  const int rc = tjDecompress2(tj, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(),
                               out.data(), static_cast<int>(width), 0, static_cast<int>(height),
                               channels == 3 ? TJPF_RGB : TJPF_GRAY, TJFLAG_LIMITSCANS);
  tjDestroy(tj);
  if (rc != 0) out.clear();
  return out;
}

// DecodeImage's error for `record`, for comparing messages.
absl::Status FullDecodeStatus(const std::string& record) {
  const DecodeImage decode(3);
  const SampleSpec in = EncodedSampleSpec(4096, 4096);
  std::vector<uint8_t> scratch(decode.ScratchBytes(EncodedSampleSpec(512, 512)));
  SampleBuffers io;
  io.src = record.data();
  io.src_bytes = record.size();
  io.op_scratch = scratch.data();
  return decode.DecodeInterleaved(in, io).status();
}

// "" when DecodeJpegWindow gives `full` cut to `w`, else what differs.
std::string WindowMismatch(const std::string& jpeg, const std::vector<uint8_t>& full,
                           uint32_t width, int channels, const PixelWindow& w) {
  std::vector<uint8_t> out(JpegWindowBytes(w, channels));
  auto image = DecodeJpegWindow(jpeg, w, out.data(), out.size());
  const std::string where = absl::StrCat("window ", w.width, "x", w.height, " at (", w.x, ", ", w.y,
                                         ") of a ", width, "-wide image");
  if (!image.ok()) return absl::StrCat(where, ": ", image.status().ToString());
  if (image->width != w.width || image->height != w.height ||
      image->pixel_bytes != static_cast<uint32_t>(channels) ||
      image->row_bytes != size_t{w.width} * channels) {
    return absl::StrCat(where, ": wrong shape");
  }
  const size_t row_bytes = size_t{w.width} * channels;
  for (uint32_t r = 0; r < w.height; ++r) {
    const uint8_t* expected = &full[(size_t{w.y + r} * width + w.x) * channels];
    if (!std::equal(expected, expected + row_bytes, image->pixels + r * image->row_bytes)) {
      return absl::StrCat(where, ": row ", r, " differs from the full decode");
    }
  }
  return "";
}

// True when the entropy-coded data holds RSTn markers (ff d0 .. ff d7).
bool HasRestartMarkers(const std::string& jpeg) {
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    const auto b = static_cast<uint8_t>(jpeg[i + 1]);
    if (static_cast<uint8_t>(jpeg[i]) == 0xff && b >= 0xd0 && b <= 0xd7) return true;
  }
  return false;
}

class JpegWindowKindTest : public ::testing::TestWithParam<JpegKind> {};

// Edges and corners, 1x1 windows, the full image and random windows of every size, each
// compared byte for byte with the full decode cut to the window. Without the margin of one
// chroma sample on each side, 4:2:2 and 4:2:0 windows (progressive and restart ones too)
// differ at their left or right edge.
TEST_P(JpegWindowKindTest, EveryWindowEqualsTheFullDecodeCutToIt) {
  const JpegKind kind = GetParam();
  std::mt19937 rng(36);
  int compared = 0;
  for (const auto& size : kSizes) {
    const uint32_t width = size[0], height = size[1];
    const std::string jpeg = EncodeWithLibjpeg(
        width, height, kind, SmoothAndNoisyPixels(width, height, kind.channels, rng));
    ASSERT_FALSE(jpeg.empty());
    if (kind.restart_rows > 0 && height > 16) {
      ASSERT_TRUE(HasRestartMarkers(jpeg)) << kind.name << " " << width << "x" << height;
    }
    const std::vector<uint8_t> full = FullDecode(jpeg, width, height, kind.channels);
    ASSERT_FALSE(full.empty()) << kind.name;

    std::vector<PixelWindow> windows;
    windows.push_back({0, 0, width, height});  // (c) the full image
    // (a) windows touching each edge and each corner, at a few sizes; (b) 1x1 windows.
    for (const uint32_t side : {1u, 5u, 19u, 40u}) {
      const uint32_t w = std::min(side, width), h = std::min(side, height);
      const uint32_t xs[] = {0, (width - w) / 2, width - w};
      const uint32_t ys[] = {0, (height - h) / 2, height - h};
      for (const uint32_t x : xs) {
        for (const uint32_t y : ys) windows.push_back({x, y, w, h});
      }
      windows.push_back({0, (height - h) / 2, width, h});  // full-width bands
      windows.push_back({(width - w) / 2, 0, w, height});  // full-height bands
    }
    // (d) random windows: any size, and small ones.
    for (int i = 0; i < 60; ++i) {
      const uint32_t w = 1 + rng() % (i % 2 == 0 ? width : std::min(width, 9u));
      const uint32_t h = 1 + rng() % (i % 2 == 0 ? height : std::min(height, 9u));
      windows.push_back({static_cast<uint32_t>(rng() % (width - w + 1)),
                         static_cast<uint32_t>(rng() % (height - h + 1)), w, h});
    }
    for (const PixelWindow& w : windows) {
      ASSERT_EQ(WindowMismatch(jpeg, full, width, kind.channels, w), "") << kind.name;
      ++compared;
    }
  }
  EXPECT_GT(compared, 400);
}

// A JPEG decoded whole at 1/scale through libjpeg's API, as PIL's draft decodes it (scale_num
// 1, scale_denom `scale`, accurate IDCT, fancy upsampling, every row read in order): the
// reference the scaled windows are cut from. Empty on failure.
std::vector<uint8_t> ScaledFullDecode(const std::string& jpeg, int channels, uint32_t scale,
                                      uint32_t* width, uint32_t* height) {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr jerr{};
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size());
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
  cinfo.scale_num = 1;
  cinfo.scale_denom = scale;
  jpeg_start_decompress(&cinfo);
  *width = cinfo.output_width;
  *height = cinfo.output_height;
  std::vector<uint8_t> out(size_t{*width} * *height * channels);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = &out[size_t{cinfo.output_scanline} * *width * channels];
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

// DecodeImage(draft=...)'s decode: at 1/2, 1/4 and 1/8 every window of the reduced image is
// the whole reduced decode cut to it, byte for byte (python/tests/test_decode_oracle.py checks
// the whole reduced image against PIL's draft).
TEST_P(JpegWindowKindTest, ScaledWindowsEqualTheScaledFullDecodeCutToThem) {
  const JpegKind kind = GetParam();
  std::mt19937 rng(362);
  int compared = 0;
  constexpr uint32_t kScaledSizes[][2] = {{333, 250}, {37, 29}, {1, 1},
                                          {17, 1},    {100, 3}, {401, 203}};
  for (const auto& size : kScaledSizes) {
    const std::string jpeg = EncodeWithLibjpeg(
        size[0], size[1], kind, SmoothAndNoisyPixels(size[0], size[1], kind.channels, rng));
    ASSERT_FALSE(jpeg.empty());
    for (const uint32_t scale : {2u, 4u, 8u}) {
      uint32_t width = 0, height = 0;
      const std::vector<uint8_t> full =
          ScaledFullDecode(jpeg, kind.channels, scale, &width, &height);
      const JpegHeader expected = ScaledHeader(JpegHeader{size[0], size[1], 3}, scale);
      ASSERT_EQ(width, expected.width) << kind.name << " 1/" << scale;
      ASSERT_EQ(height, expected.height) << kind.name << " 1/" << scale;
      std::vector<PixelWindow> windows = {{0, 0, width, height},
                                          {0, 0, 1, 1},
                                          {width - 1, height - 1, 1, 1},
                                          {0, height / 2, width, height - height / 2}};
      for (int i = 0; i < 30; ++i) {
        const uint32_t w = 1 + rng() % width, h = 1 + rng() % height;
        windows.push_back({static_cast<uint32_t>(rng() % (width - w + 1)),
                           static_cast<uint32_t>(rng() % (height - h + 1)), w, h});
      }
      for (const PixelWindow& w : windows) {
        std::vector<uint8_t> out(JpegWindowBytes(w, kind.channels));
        auto image = DecodeJpegWindow(jpeg, w, out.data(), out.size(), nullptr, scale);
        ASSERT_TRUE(image.ok()) << kind.name << " 1/" << scale << ": " << image.status();
        const size_t row_bytes = size_t{w.width} * kind.channels;
        for (uint32_t r = 0; r < w.height; ++r) {
          const uint8_t* want = &full[(size_t{w.y + r} * width + w.x) * kind.channels];
          ASSERT_TRUE(std::equal(want, want + row_bytes, image->pixels + r * image->row_bytes))
              << kind.name << " 1/" << scale << " window " << w.width << "x" << w.height << " at ("
              << w.x << ", " << w.y << ") row " << r;
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 500);
}

INSTANTIATE_TEST_SUITE_P(Kinds, JpegWindowKindTest, ::testing::ValuesIn(kKinds),
                         [](const ::testing::TestParamInfo<JpegKind>& param_info) {
                           return std::string(param_info.param.name);
                         });

// PIL's draft scale (JpegImagePlugin.draft): the largest of 8, 4, 2, 1 not over
// min(W // w, H // h); sides rounded up.
TEST(JpegWindowTest, DraftScaleIsPilsChoice) {
  const JpegHeader photo{500, 375, 3};
  EXPECT_EQ(DraftScale(photo, 112, 112), 2u);  // min(4, 3) = 3 -> 2
  EXPECT_EQ(DraftScale(photo, 64, 64), 4u);    // min(7, 5) = 5 -> 4
  EXPECT_EQ(DraftScale(photo, 32, 32), 8u);    // min(15, 11) -> 8
  EXPECT_EQ(DraftScale(photo, 224, 224), 1u);  // min(2, 1) = 1
  EXPECT_EQ(DraftScale(photo, 187, 250), 2u);  // (h, w): min(500 // 250, 375 // 187) = 2
  EXPECT_EQ(DraftScale(photo, 188, 250), 1u);  // 375 // 188 = 1
  EXPECT_EQ(DraftScale(photo, 600, 600), 1u);  // larger than the image: 0 -> 1
  const JpegHeader half = ScaledHeader(photo, 2);
  EXPECT_EQ(half.width, 250u);
  EXPECT_EQ(half.height, 188u);  // 375 / 2 rounded up
  EXPECT_EQ(ScaledHeader(JpegHeader{1, 17, 1}, 8).height, 3u);
  EXPECT_EQ(ScaledHeader(JpegHeader{1, 17, 1}, 8).width, 1u);
}

TEST(JpegWindowTest, HeaderGivesSizeAndColourKindWithoutDecoding) {
  std::mt19937 rng(1);
  const JpegKind grey{"grey", 1, 1, 1, false, 0};
  const JpegKind colour{"420", 3, 2, 2, false, 0};
  auto g = ReadJpegHeader(EncodeWithLibjpeg(17, 9, grey, SmoothAndNoisyPixels(17, 9, 1, rng)));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->width, 17u);
  EXPECT_EQ(g->height, 9u);
  EXPECT_EQ(g->pixel_bytes, 1u);
  auto c = ReadJpegHeader(EncodeWithLibjpeg(5, 30, colour, SmoothAndNoisyPixels(5, 30, 3, rng)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->width, 5u);
  EXPECT_EQ(c->height, 30u);
  EXPECT_EQ(c->pixel_bytes, 3u);
}

TEST(JpegWindowTest, SmallWindowDecodesFewerPixelsThanStoredAndTheFullWindowAll) {
  std::mt19937 rng(2);
  const JpegKind kind{"420", 3, 2, 2, false, 0};
  const std::string jpeg =
      EncodeWithLibjpeg(333, 250, kind, SmoothAndNoisyPixels(333, 250, 3, rng));
  std::vector<uint8_t> out(JpegWindowBytes({0, 0, 333, 250}, 3));
  uint64_t decoded = 0;
  ASSERT_TRUE(DecodeJpegWindow(jpeg, {160, 120, 8, 8}, out.data(), out.size(), &decoded).ok());
  // Columns 158..169 (one chroma sample either side) in iMCU columns: 144..175; rows: the
  // window's iMCU row and one above and below for fancy upsampling, 96..143.
  EXPECT_EQ(decoded, 32u * 48u);
  ASSERT_TRUE(DecodeJpegWindow(jpeg, {0, 0, 333, 250}, out.data(), out.size(), &decoded).ok());
  EXPECT_EQ(decoded, 333u * 250u);
}

// Decoding stops after the window: a single-scan JPEG cut short after the window's rows (and
// the iMCU row below them that fancy upsampling reads) still decodes the window, though the
// full decode refuses it; a window reaching into the missing part is refused as truncated.
TEST(JpegWindowTest, TruncatedAfterTheWindowDecodesItAndBeforeItIsDataLoss) {
  std::mt19937 rng(3);
  const JpegKind kind{"420", 3, 2, 2, false, 0};
  const uint32_t width = 64, height = 512;
  const std::string jpeg =
      EncodeWithLibjpeg(width, height, kind, SmoothAndNoisyPixels(width, height, 3, rng));
  const std::vector<uint8_t> full = FullDecode(jpeg, width, height, 3);
  ASSERT_FALSE(full.empty());
  const std::string truncated = jpeg.substr(0, jpeg.size() / 2);  // about rows 0..255
  EXPECT_EQ(WindowMismatch(truncated, full, width, 3, {3, 10, 50, 30}), "");
  EXPECT_THAT(FullDecodeStatus(truncated).message(), HasSubstr("damaged or truncated JPEG"));

  std::vector<uint8_t> out(JpegWindowBytes({0, 0, width, height}, 3));
  auto late = DecodeJpegWindow(truncated, {0, 400, 8, 8}, out.data(), out.size());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(late.status().message(), HasSubstr("damaged or truncated JPEG: "));
  EXPECT_EQ(late.status().message(), FullDecodeStatus(truncated).message());
}

// Garbage between the entropy-coded data and the EOI: the full decode refuses it (a libjpeg
// warning, read by jpeg_finish_decompress); so does a window down to the last row, which reads
// on to the EOI. A window above it stops before and does not see it.
TEST(JpegWindowTest, GarbageBeforeEoiIsSeenByWindowsDownToTheLastRowOnly) {
  std::mt19937 rng(7);
  const JpegKind kind{"420", 3, 2, 2, false, 0};
  const std::string clean = EncodeWithLibjpeg(64, 64, kind, SmoothAndNoisyPixels(64, 64, 3, rng));
  const std::vector<uint8_t> full = FullDecode(clean, 64, 64, 3);
  ASSERT_FALSE(full.empty());
  const std::string jpeg =
      clean.substr(0, clean.size() - 2) + std::string(20, '\x11') + clean.substr(clean.size() - 2);
  const absl::Status full_status = FullDecodeStatus(jpeg);
  ASSERT_EQ(full_status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(full_status.message(), HasSubstr("extraneous bytes before marker 0xd9"));
  std::vector<uint8_t> out(JpegWindowBytes({0, 0, 64, 64}, 3));
  auto bottom = DecodeJpegWindow(jpeg, {10, 60, 8, 4}, out.data(), out.size());
  EXPECT_EQ(bottom.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bottom.status().message(), full_status.message());
  EXPECT_EQ(WindowMismatch(jpeg, full, 64, 3, {10, 0, 8, 40}), "");
}

TEST(JpegWindowTest, CorruptHeaderIsDataLossNamingTheCauseAsTheFullDecodeDoes) {
  std::mt19937 rng(4);
  const JpegKind kind{"420", 3, 2, 2, false, 0};
  std::string jpeg = EncodeWithLibjpeg(32, 32, kind, SmoothAndNoisyPixels(32, 32, 3, rng));
  const size_t sof = jpeg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  jpeg[sof + 4] = 7;  // the frame's sample precision
  std::vector<uint8_t> out(JpegWindowBytes({0, 0, 32, 32}, 3));
  auto bad = DecodeJpegWindow(jpeg, {0, 0, 4, 4}, out.data(), out.size());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("corrupt JPEG header: "));
  EXPECT_THAT(bad.status().message(), HasSubstr("precision 7"));
  EXPECT_EQ(bad.status().message(), FullDecodeStatus(jpeg).message());

  const std::string cut = jpeg.substr(0, 40);  // inside the tables
  auto cut_status = DecodeJpegWindow(cut, {0, 0, 1, 1}, out.data(), out.size()).status();
  EXPECT_EQ(cut_status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(cut_status.message(), FullDecodeStatus(cut).message());
}

TEST(JpegWindowTest, CorruptEntropyDataInTheWindowIsDataLossAsInTheFullDecode) {
  std::mt19937 rng(5);
  const JpegKind kind{"420", 3, 2, 2, false, 0};
  std::string jpeg = EncodeWithLibjpeg(64, 64, kind, SmoothAndNoisyPixels(64, 64, 3, rng));
  const size_t sos = jpeg.find("\xff\xda");
  ASSERT_NE(sos, std::string::npos);
  const size_t data = sos + 2 + ((uint8_t(jpeg[sos + 2]) << 8) | uint8_t(jpeg[sos + 3]));
  for (size_t i = data + 20; i < data + 60; ++i) jpeg[i] = '\xff';  // markers where data was
  const absl::Status full = FullDecodeStatus(jpeg);
  ASSERT_EQ(full.code(), absl::StatusCode::kDataLoss);
  std::vector<uint8_t> out(JpegWindowBytes({0, 0, 64, 64}, 3));
  auto bad = DecodeJpegWindow(jpeg, {0, 0, 64, 64}, out.data(), out.size());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().message(), full.message()) << bad.status() << " | " << full;
}

TEST(JpegWindowTest, ScanBombAndCmykAreRefusedWithTheFullDecodesMessages) {
  const std::string bomb = ProgressiveJpegWithRepeatedScan(16, 16, 600);
  std::vector<uint8_t> out(JpegWindowBytes({0, 0, 16, 16}, 3));
  auto scans = DecodeJpegWindow(bomb, {0, 0, 4, 4}, out.data(), out.size());
  EXPECT_EQ(scans.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(scans.status().message(), FullDecodeStatus(bomb).message());

  const std::vector<uint8_t> cmyk_pixels(16 * 16 * 4, 100);
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  ASSERT_EQ(
      tjCompress2(tj, cmyk_pixels.data(), 16, 0, 16, TJPF_CMYK, &buf, &len, TJSAMP_444, 90, 0), 0);
  const std::string cmyk(reinterpret_cast<char*>(buf), len);
  tjFree(buf);
  tjDestroy(tj);
  auto refused = DecodeJpegWindow(cmyk, {0, 0, 4, 4}, out.data(), out.size());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(refused.status().message(), HasSubstr("CMYK JPEG"));
  EXPECT_EQ(refused.status().message(), FullDecodeStatus(cmyk).message());
}

TEST(JpegWindowTest, WindowOutsideTheImageOrTooSmallABufferIsInvalidArgument) {
  std::mt19937 rng(6);
  const JpegKind kind{"422", 3, 2, 1, false, 0};
  const std::string jpeg = EncodeWithLibjpeg(37, 29, kind, SmoothAndNoisyPixels(37, 29, 3, rng));
  std::vector<uint8_t> out(JpegWindowBytes({0, 0, 37, 29}, 3));
  for (const PixelWindow& w :
       {PixelWindow{0, 0, 38, 1}, PixelWindow{36, 0, 2, 1}, PixelWindow{0, 29, 1, 1},
        PixelWindow{0, 0, 0, 5}, PixelWindow{0, 0, 5, 0}, PixelWindow{0xffffffffu, 0, 2, 1}}) {
    auto bad = DecodeJpegWindow(jpeg, w, out.data(), out.size());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << w.x << " " << w.width;
    EXPECT_THAT(bad.status().message(), HasSubstr("not inside the 37x29 image"));
  }
  const PixelWindow w{0, 0, 10, 10};
  auto small = DecodeJpegWindow(jpeg, w, out.data(), JpegWindowBytes(w, 3) - 1);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(small.status().message(), HasSubstr("output buffer"));
}

}  // namespace
}  // namespace sluice::transforms_internal
