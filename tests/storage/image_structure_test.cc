// The ingestion's structural checks of JPEG and PNG bytes (storage/image_structure.h): whole
// files pass with their declared size; truncations anywhere, zero bytes and non-images are
// refused with the reason.
#include "storage/image_structure.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

// Issue 35: a 1 MB PNG whose zTXt (or iTXt, iCCP) chunk inflates to 1 GiB passed, and each
// decode then inflated it. Refused at ingestion, naming the chunk; the bound is PIL's 1 MiB.
TEST(ImageStructureTest, PngMetadataChunkInflatingPastOneMibIsRefusedNamingTheChunk) {
  const std::string png = EncodePng(19, 13, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(19, 13, 3));
  const std::string bomb = ZlibOfZeros(64 << 20);
  const std::string chunks[][2] = {
      {"zTXt", std::string("Comment\0\0", 9) + bomb},
      {"iTXt", std::string("Comment\0\1\0en\0\0", 14) + bomb},
      {"iCCP", std::string("icc\0\0", 5) + bomb},
  };
  for (const auto& [type, data] : chunks) {
    auto s = CheckImageStructure(WithChunkAfterIhdr(png, type, data));
    EXPECT_THAT(s.status().message(),
                HasSubstr(absl::StrCat("PNG chunk '", type, "' at offset 33 (")))
        << type;
    EXPECT_THAT(s.status().message(), HasSubstr("inflates to more than 1048576 bytes")) << type;
  }
}

TEST(ImageStructureTest, PngMetadataWithinTheBoundsPasses) {
  const std::string png = EncodePng(19, 13, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(19, 13, 3));
  const std::string one_mib = ZlibOfZeros(1 << 20);
  for (const std::string& file :
       {WithChunkAfterIhdr(png, "zTXt", std::string("Comment\0\0", 9) + one_mib),
        WithChunkAfterIhdr(png, "iCCP", std::string("icc\0\0", 5) + one_mib),
        WithChunkAfterIhdr(png, "iTXt", std::string("Comment\0\0\0en\0\0", 14) + "plain"),
        WithChunkAfterIhdr(png, "tEXt", std::string("Comment\0", 8) + std::string(4 << 20, 'x')),
        WithChunkAfterIhdr(png, "prIv", std::string(20 << 20, 'x'))}) {  // not kept: any size
    auto s = CheckImageStructure(file);
    EXPECT_TRUE(s.ok()) << s.status();
  }
}

// A 100 MB tEXt chunk took the Loader to 532 MB (libspng copies it at each decode).
TEST(ImageStructureTest, PngMetadataOfMoreThanEightMibInAllIsRefused) {
  const std::string png = EncodePng(19, 13, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(19, 13, 3));
  const std::string text = std::string("Comment\0", 8) + std::string(5 << 20, 'x');
  auto s =
      CheckImageStructure(WithChunkAfterIhdr(WithChunkAfterIhdr(png, "tEXt", text), "tEXt", text));
  EXPECT_THAT(s.status().message(),
              HasSubstr("hold more than 8388608 bytes (inflated), the bound on them all, with "
                        "chunk 'tEXt' at offset "));
  std::string many = png;
  for (int i = 0; i < 1001; ++i) many = WithChunkAfterIhdr(many, "tEXt", std::string("k\0v", 3));
  EXPECT_THAT(CheckImageStructure(many).status().message(),
              HasSubstr("more than 1000 metadata chunks"));
}

// Issue 35: a 0.9 MB 9000x9000 progressive JPEG with its last scan repeated 3000 times passed
// in 0.03 s and took 125 s to decode. More than 500 scans (libjpeg-turbo's bound) is refused.
TEST(ImageStructureTest, JpegOfMoreThan500ScansIsRefused) {
  auto bomb = CheckImageStructure(ProgressiveJpegWithRepeatedScan(32, 32, 600));
  EXPECT_THAT(bomb.status().message(), HasSubstr("JPEG of more than 500 scans"));
  auto fine = CheckImageStructure(ProgressiveJpegWithRepeatedScan(32, 32, 400));
  EXPECT_TRUE(fine.ok()) << fine.status();
  // What DecodeImage checks before decoding: progressive JPEGs only.
  EXPECT_THAT(CheckJpegScanCount(ProgressiveJpegWithRepeatedScan(32, 32, 600)).message(),
              HasSubstr("JPEG of more than 500 scans (scan 501 at offset "));
  EXPECT_TRUE(CheckJpegScanCount(ProgressiveJpegWithRepeatedScan(32, 32, 400)).ok());
  EXPECT_TRUE(CheckJpegScanCount(EncodeJpeg(8, 8, 3, TestPixels(8, 8, 3))).ok());
}

}  // namespace
}  // namespace sluice
