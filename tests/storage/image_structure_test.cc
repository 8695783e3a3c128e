// The ingestion's structural checks of JPEG and PNG bytes (storage/image_structure.h): whole
// files pass with their declared size; truncations anywhere, zero bytes and non-images are
// refused with the reason.
#include "storage/image_structure.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice {
namespace {

using ::sluice::testing::EncodeJpeg;
using ::sluice::testing::EncodePng;
using ::sluice::testing::TestPixels;
using ::testing::HasSubstr;

TEST(ImageStructureTest, WholeJpegAndPngPassWithTheirDeclaredSize) {
  auto j = CheckImageStructure(EncodeJpeg(40, 24, 3, TestPixels(40, 24, 3)));
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->encoding, SampleEncoding::kJpeg);
  EXPECT_EQ(j->width, 40u);
  EXPECT_EQ(j->height, 24u);
  auto p = CheckImageStructure(EncodePng(13, 9, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(13, 9, 3)));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->encoding, SampleEncoding::kPng);
  EXPECT_EQ(p->width, 13u);
  EXPECT_EQ(p->height, 9u);
}

// A progressive JPEG has several scans, with tables between them, before its EOI.
TEST(ImageStructureTest, ProgressiveJpegPassesAndItsTruncationIsRefused) {
  const std::vector<uint8_t> pixels = TestPixels(48, 40, 3);
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  ASSERT_EQ(tjCompress2(tj, pixels.data(), 48, 0, 40, TJPF_RGB, &buf, &len, TJSAMP_420, 85,
                        TJFLAG_PROGRESSIVE),
            0);
  const std::string jpeg(reinterpret_cast<char*>(buf), len);
  tjFree(buf);
  tjDestroy(tj);
  // More than one scan (SOS) in the file.
  ASSERT_NE(jpeg.find("\xFF\xDA"), jpeg.rfind("\xFF\xDA"));
  auto s = CheckImageStructure(jpeg);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->width, 48u);
  EXPECT_EQ(s->height, 40u);
  // Cut inside the last scan: no EOI.
  EXPECT_THAT(CheckImageStructure(jpeg.substr(0, jpeg.size() - 10)).status().message(),
              HasSubstr("truncated JPEG"));
}

TEST(ImageStructureTest, BytesAfterTheEndMarkerAreAllowed) {
  EXPECT_TRUE(CheckImageStructure(EncodeJpeg(8, 8, 3, TestPixels(8, 8, 3)) + "trailer").ok());
  EXPECT_TRUE(
      CheckImageStructure(EncodePng(8, 8, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(8, 8, 3)) + "x")
          .ok());
}

TEST(ImageStructureTest, JpegTruncatedAtAnyLengthIsRefused) {
  const std::string jpeg = EncodeJpeg(32, 32, 3, TestPixels(32, 32, 3));
  for (size_t n = 3; n < jpeg.size(); ++n) {
    auto s = CheckImageStructure(jpeg.substr(0, n));
    ASSERT_FALSE(s.ok()) << "kept " << n << " of " << jpeg.size() << " bytes";
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("JPEG")) << n;
  }
  EXPECT_THAT(CheckImageStructure(jpeg.substr(0, jpeg.size() - 2)).status().message(),
              HasSubstr("truncated JPEG: no EOI marker (FF D9)"));
  EXPECT_THAT(CheckImageStructure(jpeg.substr(0, 30)).status().message(),
              HasSubstr("runs past the end"));
}

TEST(ImageStructureTest, PngTruncatedAtAnyLengthIsRefused) {
  const std::string png = EncodePng(32, 32, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(32, 32, 3));
  for (size_t n = 8; n < png.size(); ++n) {
    auto s = CheckImageStructure(png.substr(0, n));
    ASSERT_FALSE(s.ok()) << "kept " << n << " of " << png.size() << " bytes";
    EXPECT_THAT(s.status().message(), HasSubstr("PNG")) << n;
  }
  EXPECT_THAT(CheckImageStructure(png.substr(0, png.size() - 12)).status().message(),
              HasSubstr("with no IEND chunk"));
  EXPECT_THAT(CheckImageStructure(png.substr(0, png.size() / 2)).status().message(),
              HasSubstr("truncated PNG: chunk 'IDAT' at offset 33"));
}

TEST(ImageStructureTest, ZeroBytesAndNonImagesAreRefused) {
  EXPECT_THAT(CheckImageStructure("").status().message(), HasSubstr("zero bytes"));
  EXPECT_THAT(CheckImageStructure("GIF89a").status().message(),
              HasSubstr("not a JPEG or PNG image (starts with 47 49 46 38 39 61"));
}

TEST(ImageStructureTest, HeaderReadsTheSizeOfATruncatedFile) {
  const std::string png = EncodePng(21, 5, SPNG_COLOR_TYPE_GRAYSCALE, TestPixels(21, 5, 1));
  auto p = ReadImageHeader(png.substr(0, 40));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->width, 21u);
  EXPECT_EQ(p->height, 5u);
  const std::string jpeg = EncodeJpeg(17, 6, 1, TestPixels(17, 6, 1));
  auto j = ReadImageHeader(jpeg.substr(0, jpeg.size() / 2));
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->width, 17u);
  EXPECT_EQ(j->height, 6u);
}

}  // namespace
}  // namespace sluice
