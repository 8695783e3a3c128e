#include "pipeline/transforms/decode_image.h"

#include <spng.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"
#include "storage/image_structure.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice {
namespace {
using ::sluice::testing::EncodeJpeg;
using ::sluice::testing::EncodePng;
using ::sluice::testing::ProgressiveJpegWithRepeatedScan;
using ::sluice::testing::TestPixels;
using ::sluice::testing::WithChunkAfterIhdr;
using ::sluice::testing::ZlibOfZeros;
using ::testing::HasSubstr;

// Runs `chain` on one record with images bounded by `bound` x `bound`.
absl::StatusOr<std::vector<uint8_t>> RunChain(const std::string& chain_text,
                                              const std::string& record, uint32_t bound = 64,
                                              SampleSpec* out_spec = nullptr) {
  auto ops = ParseTransforms(chain_text);
  if (!ops.ok()) return ops.status();
  auto chain = TransformChain::Create(std::move(*ops), EncodedSampleSpec(bound, bound));
  if (!chain.ok()) return chain.status();
  if (out_spec != nullptr) *out_spec = chain->output_spec();
  std::vector<uint8_t> out(chain->output_spec().bytes());
  std::vector<uint8_t> scratch(chain->scratch_bytes() + 64);
  uint8_t* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  absl::Status s =
      chain->ApplyRecord(record.data(), record.size(), out.data(), SampleKey{1, 0, 0}, aligned);
  if (!s.ok()) return s;
  return out;
}

// Interleaved HWC to planar CHW.
std::vector<uint8_t> Planar(const std::vector<uint8_t>& hwc, size_t pixels, size_t stride,
                            size_t channels) {
  std::vector<uint8_t> out(pixels * channels);
  for (size_t c = 0; c < channels; ++c) {
    for (size_t i = 0; i < pixels; ++i) out[c * pixels + i] = hwc[i * stride + c];
  }
  return out;
}

TEST(DecodeImageTest, RgbPngDecodesToItsPixelsChannelsFirst) {
  const std::vector<uint8_t> px = TestPixels(7, 5, 3);
  auto out = RunChain("DecodeImage(mode=RGB), CenterCrop((5, 7))", EncodePng(7, 5, 2, px));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Planar(px, 35, 3, 3));
}

TEST(DecodeImageTest, GreyPngGivesThreeEqualPlanesForRgbAndOneForL) {
  const std::vector<uint8_t> px = TestPixels(6, 4, 1);
  const std::string png = EncodePng(6, 4, SPNG_COLOR_TYPE_GRAYSCALE, px);
  auto rgb = RunChain("DecodeImage(mode=RGB), CenterCrop((4, 6))", png);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  std::vector<uint8_t> three = px;
  three.insert(three.end(), px.begin(), px.end());
  three.insert(three.end(), px.begin(), px.end());
  EXPECT_EQ(*rgb, three);
  auto grey = RunChain("DecodeImage(mode=L), CenterCrop((4, 6))", png);
  ASSERT_TRUE(grey.ok()) << grey.status();
  EXPECT_EQ(*grey, px);
}

TEST(DecodeImageTest, RgbaDropsAlphaAndPaletteLooksUpItsEntries) {
  const std::vector<uint8_t> rgba = TestPixels(3, 2, 4);
  auto out = RunChain("DecodeImage(), CenterCrop((2, 3))",
                      EncodePng(3, 2, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, rgba));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, Planar(rgba, 6, 4, 3));

  const std::vector<uint8_t> palette = {10, 20, 30, 200, 100, 0};
  auto indexed = RunChain("DecodeImage(), CenterCrop((1, 3))",
                          EncodePng(3, 1, SPNG_COLOR_TYPE_INDEXED, {1, 0, 1}, palette));
  ASSERT_TRUE(indexed.ok()) << indexed.status();
  EXPECT_EQ(*indexed, (std::vector<uint8_t>{200, 10, 200, 100, 20, 100, 0, 30, 0}));
}

TEST(DecodeImageTest, LFromColourIsPilsLuma) {
  // PIL: (19595 R + 38470 G + 7471 B + 0x8000) >> 16.
  const std::vector<uint8_t> px = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 33};
  auto out = RunChain("DecodeImage(mode=L), CenterCrop((1, 4))", EncodePng(4, 1, 2, px));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, (std::vector<uint8_t>{76, 150, 29, 124}));
}

TEST(DecodeImageTest, JpegDecodesToTheSizeItDeclares) {
  SampleSpec spec;
  auto out = RunChain("DecodeImage(), Resize((9, 13))", EncodeJpeg(13, 9, 3, TestPixels(13, 9, 3)),
                      64, &spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(spec, (SampleSpec{ElementType::kU8, 3, 9, 13, SampleLayout::kCHW}));
}

TEST(DecodeImageTest, GreyJpegGivesEqualPlanes) {
  auto out =
      RunChain("DecodeImage(), CenterCrop((8, 8))", EncodeJpeg(8, 8, 1, TestPixels(8, 8, 1)));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(std::equal(out->begin(), out->begin() + 64, out->begin() + 64));
  EXPECT_TRUE(std::equal(out->begin(), out->begin() + 64, out->begin() + 128));
}

TEST(DecodeImageTest, OneByOneImageDecodesAndResizes) {
  auto png = RunChain("DecodeImage(), Resize((4, 4))", EncodePng(1, 1, 2, {9, 99, 199}));
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(std::vector<uint8_t>(png->begin(), png->begin() + 16), std::vector<uint8_t>(16, 9));
  EXPECT_EQ((*png)[47], 199);
  auto jpeg = RunChain("DecodeImage(), RandomResizedCrop(5)", EncodeJpeg(1, 1, 3, {9, 99, 199}));
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
}

TEST(DecodeImageTest, EmptyRecordIsRefused) {
  auto out = RunChain("DecodeImage(), CenterCrop(4)", "");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(out.status().message(), HasSubstr("DecodeImage(mode=RGB): empty record (0 bytes)"));
}

TEST(DecodeImageTest, NonImageIsRefusedShowingItsFirstBytes) {
  auto out = RunChain("DecodeImage(), CenterCrop(4)", "<html>hello</html>");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(out.status().message(), HasSubstr("not a JPEG (ff d8 ff) or PNG"));
  EXPECT_THAT(out.status().message(), HasSubstr("start with 3c 68 74 6d 6c 3e 68 65"));
}

TEST(DecodeImageTest, TruncatedJpegAndPngAreRefused) {
  const std::string jpeg = EncodeJpeg(32, 32, 3, TestPixels(32, 32, 3));
  auto j = RunChain("DecodeImage(), CenterCrop(4)", jpeg.substr(0, jpeg.size() / 2));
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(j.status().message(), HasSubstr("JPEG"));
  const std::string png = EncodePng(32, 32, 2, TestPixels(32, 32, 3));
  auto p = RunChain("DecodeImage(), CenterCrop(4)", png.substr(0, png.size() / 2));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(p.status().message(), HasSubstr("PNG"));
}

// Only the end marker (FF D9) missing: libjpeg decodes every pixel and warns "Premature end of
// JPEG file"; PIL refuses such a file by default (LOAD_TRUNCATED_IMAGES off), and so does
// DecodeImage.
TEST(DecodeImageTest, JpegWithoutItsEndMarkerIsRefusedAsTruncated) {
  const std::string jpeg = EncodeJpeg(32, 32, 3, TestPixels(32, 32, 3));
  ASSERT_EQ(jpeg.substr(jpeg.size() - 2), "\xFF\xD9");
  auto j = RunChain("DecodeImage(), CenterCrop(4)", jpeg.substr(0, jpeg.size() - 2));
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(j.status().message(), HasSubstr("damaged or truncated JPEG: "));
  EXPECT_THAT(j.status().message(), HasSubstr("Premature end of JPEG file"));
}

TEST(DecodeImageTest, CorruptJpegAndPngAreRefused) {
  std::string jpeg = EncodeJpeg(32, 32, 3, TestPixels(32, 32, 3));
  for (size_t i = 3; i < 40; ++i) jpeg[i] = static_cast<char>(0x5a);  // the header's markers
  auto j = RunChain("DecodeImage(), CenterCrop(4)", jpeg);
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(j.status().message(), HasSubstr("JPEG"));
  std::string png = EncodePng(32, 32, 2, TestPixels(32, 32, 3));
  png[png.size() / 2] = static_cast<char>(png[png.size() / 2] ^ 0xff);  // image data: bad CRC
  auto p = RunChain("DecodeImage(), CenterCrop(4)", png);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(p.status().message(), HasSubstr("PNG"));
}

TEST(DecodeImageTest, GoodJpegDecodesAfterACorruptOneOnTheSameThread) {
  std::string bad = EncodeJpeg(16, 16, 3, TestPixels(16, 16, 3));
  const std::string good = bad;
  bad.resize(bad.size() - 40);
  bad.append(40, '\x11');
  // CenterCrop(16) keeps the whole image: its decode reads to the end, where the damage is.
  EXPECT_FALSE(RunChain("DecodeImage(), CenterCrop(16)", bad).ok());
  // CenterCrop(4) decodes only the middle rows, above the damage (docs/transforms.md,
  // "Decoding only the window").
  EXPECT_TRUE(RunChain("DecodeImage(), CenterCrop(4)", bad).ok());
  for (size_t i = 3; i < 20; ++i) bad[i] = static_cast<char>(0x5a);
  EXPECT_FALSE(RunChain("DecodeImage(), CenterCrop(4)", bad).ok());
  EXPECT_TRUE(RunChain("DecodeImage(), CenterCrop(4)", good).ok());
}

// `jpeg` without its marker segments FF `marker` before the first scan.
std::string WithoutSegments(const std::string& jpeg, unsigned char marker) {
  std::string out = jpeg.substr(0, 2);
  size_t i = 2;
  while (i + 4 <= jpeg.size() && static_cast<unsigned char>(jpeg[i]) == 0xFF &&
         static_cast<unsigned char>(jpeg[i + 1]) != 0xDA) {
    const size_t len =
        (static_cast<unsigned char>(jpeg[i + 2]) << 8) | static_cast<unsigned char>(jpeg[i + 3]);
    if (static_cast<unsigned char>(jpeg[i + 1]) != marker) out += jpeg.substr(i, 2 + len);
    i += 2 + len;
  }
  return out + jpeg.substr(i);
}

std::string ProgressiveJpeg(uint32_t width, uint32_t height, int quality) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  std::string out;
  const std::vector<uint8_t> px = TestPixels(width, height, 3);
  if (tjCompress2(tj, px.data(), static_cast<int>(width), 0, static_cast<int>(height), TJPF_RGB,
                  &buf, &len, TJSAMP_444, quality, TJFLAG_PROGRESSIVE) == 0) {
    out.assign(reinterpret_cast<char*>(buf), len);
  }
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// Each JPEG is decoded with its own tables, never the previous image's on the same thread.
TEST(DecodeImageTest, AJpegWithoutQuantizationTablesIsRefusedAfterAnotherJpegAsAlone) {
  const std::string no_dqt = WithoutSegments(EncodeJpeg(16, 16, 3, TestPixels(16, 16, 3)), 0xDB);
  ASSERT_FALSE(RunChain("DecodeImage(), CenterCrop(16)", no_dqt).ok());
  ASSERT_TRUE(
      RunChain("DecodeImage(), CenterCrop(16)", EncodeJpeg(16, 16, 3, TestPixels(16, 16, 3), 40))
          .ok());
  EXPECT_FALSE(RunChain("DecodeImage(), CenterCrop(16)", no_dqt).ok());
}

TEST(DecodeImageTest, AJpegWithoutHuffmanTablesUsesTheStandardOnesAfterAnOptimizedJpeg) {
  // TurboJPEG's baseline encoder uses the standard Huffman tables: without its DHT a frame
  // decodes to the same pixels (a Motion-JPEG frame); a progressive JPEG's tables are its own.
  const std::string jpeg = EncodeJpeg(24, 16, 3, TestPixels(24, 16, 3));
  const std::string no_dht = WithoutSegments(jpeg, 0xC4);
  ASSERT_LT(no_dht.size(), jpeg.size());
  const absl::StatusOr<std::vector<uint8_t>> alone =
      RunChain("DecodeImage(), CenterCrop(16)", no_dht);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(*alone, *RunChain("DecodeImage(), CenterCrop(16)", jpeg));
  ASSERT_TRUE(RunChain("DecodeImage(), CenterCrop(16)", ProgressiveJpeg(24, 16, 95)).ok());
  const absl::StatusOr<std::vector<uint8_t>> after =
      RunChain("DecodeImage(), CenterCrop(16)", no_dht);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *alone);
}

TEST(DecodeImageTest, ImageOverTheBoundIsRefusedFromItsHeader) {
  const std::string png = EncodePng(65, 2, 2, TestPixels(65, 2, 3));
  auto p = RunChain("DecodeImage(), CenterCrop(4)", png, 64);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(p.status().message(), HasSubstr("PNG declares 65x2 pixels"));
  EXPECT_THAT(p.status().message(), HasSubstr("over the bound of 64x64"));
  // A decompression bomb: a header claiming 60000 x 60000 and no data to speak of.
  std::string jpeg = EncodeJpeg(8, 8, 3, TestPixels(8, 8, 3));
  const size_t sof = jpeg.find("\xff\xc0", 0, 2);
  ASSERT_NE(sof, std::string::npos);
  jpeg[sof + 5] = jpeg[sof + 7] = static_cast<char>(0xea);
  jpeg[sof + 6] = jpeg[sof + 8] = static_cast<char>(0x60);
  auto j = RunChain("DecodeImage(), CenterCrop(4)", jpeg, 256);
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(j.status().message(), HasSubstr("JPEG declares 60000x60000 pixels"));
}

// Issue 35: indices past a short PLTE decoded to (0, 0, 0); PIL pads the palette with a grey
// ramp, index i giving (i, i, i) (and L = i).
TEST(DecodeImageTest, PaletteIndicesPastThePlteArePilsGreyRamp) {
  const std::vector<uint8_t> palette = {10, 20, 30, 200, 100, 0};
  const std::string png = EncodePng(4, 1, SPNG_COLOR_TYPE_INDEXED, {1, 2, 0, 255}, palette);
  ASSERT_FALSE(png.empty());
  auto rgb = RunChain("DecodeImage(), CenterCrop((1, 4))", png);
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(*rgb, (std::vector<uint8_t>{200, 2, 10, 255, 100, 2, 20, 255, 0, 2, 30, 255}));
  auto grey = RunChain("DecodeImage(mode=L), CenterCrop((1, 4))", png);
  ASSERT_TRUE(grey.ok()) << grey.status();
  EXPECT_EQ(*grey, (std::vector<uint8_t>{118, 2, 18, 255}));
}

// Issue 35: a zTXt (iTXt, iCCP) chunk inflating to 1 GiB cost ~1 GB and seconds at each
// decode. libspng now stops inflating at 4 MiB and the record is refused.
TEST(DecodeImageTest, PngMetadataDecompressionBombIsRefused) {
  const std::string png = EncodePng(19, 13, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(19, 13, 3));
  const std::string bomb = ZlibOfZeros(64 << 20);
  const std::string chunks[][2] = {
      {"zTXt", std::string("Comment\0\0", 9) + bomb},
      {"iTXt", std::string("Comment\0\1\0en\0\0", 14) + bomb},
      {"iCCP", std::string("icc\0\0", 5) + bomb},
      {"tEXt", std::string("Comment\0", 8) + std::string(20 << 20, 'x')},
  };
  for (const auto& [type, data] : chunks) {
    auto p = RunChain("DecodeImage(), CenterCrop(4)", WithChunkAfterIhdr(png, type, data));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss) << type;
    EXPECT_THAT(p.status().message(), HasSubstr("over the decoder's bound")) << type;
  }
  // What ingestion passes (1 MiB inflated per chunk, 8 MiB in all) decodes.
  const std::string one_mib = ZlibOfZeros(1 << 20);
  std::string fine = png;
  for (int i = 0; i < 3; ++i) {
    fine = WithChunkAfterIhdr(fine, "zTXt", std::string("Comment\0\0", 9) + one_mib);
    fine = WithChunkAfterIhdr(fine, "tEXt",
                              std::string("Comment\0", 8) + std::string(1000 << 10, 'x'));
  }
  fine = WithChunkAfterIhdr(fine, "iCCP", std::string("icc\0\0", 5) + one_mib);
  ASSERT_TRUE(CheckImageStructure(fine).ok()) << CheckImageStructure(fine).status();
  auto ok = RunChain("DecodeImage(), CenterCrop((13, 19))", fine, 64);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, Planar(TestPixels(19, 13, 3), 19 * 13, 3, 3));
}

// Issue 35: a progressive JPEG with one scan repeated 3000 times decoded for minutes. More than
// 500 scans (TJFLAG_LIMITSCANS) is refused.
TEST(DecodeImageTest, JpegOfMoreThan500ScansIsRefused) {
  auto bomb =
      RunChain("DecodeImage(), CenterCrop(4)", ProgressiveJpegWithRepeatedScan(32, 32, 600));
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bomb.status().message(), HasSubstr("more than 500 scans"));
  auto fine = RunChain("DecodeImage(), CenterCrop(4)", ProgressiveJpegWithRepeatedScan(32, 32, 0));
  EXPECT_TRUE(fine.ok()) << fine.status();
}

TEST(DecodeImageTest, OnlyTakesEncodedInput) {
  auto ops = ParseTransforms("DecodeImage()");
  ASSERT_TRUE(ops.ok());
  auto chain = TransformChain::Create(std::move(*ops), SampleSpec{ElementType::kU8, 3, 8, 8});
  EXPECT_THAT(chain.status().message(), HasSubstr("DecodeImage: expected encoded images"));
}

TEST(DecodeImageTest, ModeParsesTorchvisionSpellingsAndRefusesOthers) {
  for (const char* text :
       {"DecodeImage(mode=GRAY)", "DecodeImage(ImageReadMode.GRAY)", "DecodeImage('L')"}) {
    auto ops = ParseTransforms(text);
    ASSERT_TRUE(ops.ok()) << ops.status();
    EXPECT_EQ((*ops)[0]->Identity(), "DecodeImage(mode=L)");
  }
  auto bad = ParseTransforms("DecodeImage(mode=CMYK)");
  EXPECT_THAT(bad.status().message(), HasSubstr("expected RGB or L (grey), got 'CMYK'"));
}

}  // namespace
}  // namespace sluice
