// The chain's fused path (DecodeImage, RandomResizedCrop[, RandomHorizontalFlip]) against the
// ops one after the other, and its interleaved resize kernels against the planar one: all bit
// for bit.
#include <spng.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/internal/bilinear.h"
#include "pipeline/transforms/internal/bilinear_interleaved.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice {
namespace {
using ::sluice::testing::EncodeJpeg;
using ::sluice::testing::EncodePng;
using ::sluice::testing::TestPixels;
using ::testing::StartsWith;
using transforms_internal::InterleavedKernel;
using transforms_internal::InterleavedU8Image;

// Interleaved pixels of `pixel_bytes` to the CHW planes DecodeImage(mode=RGB) gives (RGB;
// alpha dropped; grey replicated).
std::vector<uint8_t> Planes(const std::vector<uint8_t>& px, uint32_t h, uint32_t w,
                            uint32_t pixel_bytes) {
  const size_t n = size_t{h} * w;
  std::vector<uint8_t> out(3 * n);
  for (size_t i = 0; i < n; ++i) {
    for (uint32_t c = 0; c < 3; ++c)
      out[c * n + i] = px[i * pixel_bytes + (pixel_bytes == 1 ? 0 : c)];
  }
  return out;
}

void MirrorRows(std::vector<uint8_t>& v, uint32_t w) {
  for (size_t r = 0; r < v.size() / w; ++r)
    std::reverse(v.begin() + r * w, v.begin() + (r + 1) * w);
}

struct Case {
  uint32_t h, w, pixel_bytes, top, left, win_h, win_w, out_h, out_w;
  bool mirror;
};

std::string Describe(const Case& c) {
  return absl::StrCat(c.h, "x", c.w, "x", c.pixel_bytes, " window ", c.win_h, "x", c.win_w, " at (",
                      c.top, ", ", c.left, ") to ", c.out_h, "x", c.out_w,
                      c.mirror ? " mirrored" : "");
}

// Both kernels give ResizeBilinear's bits on the planes (then mirrored), for windows that
// shrink, grow, keep one pixel or touch the image's right and bottom edges, and output widths
// over one column tile (256) and not a multiple of 8, and downscales of over 4x (the AVX2
// kernel's second way).
TEST(InterleavedResizeTest, EqualsThePlanarResizeBitForBit) {
  std::mt19937 rng(23);
  std::vector<Case> cases = {
      {1, 1, 3, 0, 0, 1, 1, 5, 3, false},
      {2, 9, 3, 0, 0, 2, 9, 224, 224, true},
      {40, 30, 4, 0, 0, 40, 30, 17, 301, false},
      {37, 50, 3, 36, 49, 1, 1, 8, 8, true},
      {300, 200, 3, 10, 0, 290, 200, 224, 224, true},
      {64, 64, 1, 3, 5, 50, 40, 31, 33, false},
      {5, 520, 3, 0, 0, 5, 520, 3, 260, true},
      {4, 3000, 3, 0, 0, 4, 3000, 2, 300, true},
      {3, 2100, 4, 0, 7, 3, 2093, 3, 200, false},
  };
  for (int i = 0; i < 60; ++i) {
    Case c;
    c.h = std::uniform_int_distribution<uint32_t>(1, 320)(rng);
    c.w = std::uniform_int_distribution<uint32_t>(1, 320)(rng);
    c.pixel_bytes = std::vector<uint32_t>{3, 4, 1}[i % 3];
    c.win_h = std::uniform_int_distribution<uint32_t>(1, c.h)(rng);
    c.win_w = std::uniform_int_distribution<uint32_t>(1, c.w)(rng);
    c.top = std::uniform_int_distribution<uint32_t>(0, c.h - c.win_h)(rng);
    c.left = std::uniform_int_distribution<uint32_t>(0, c.w - c.win_w)(rng);
    c.out_h = std::uniform_int_distribution<uint32_t>(1, 300)(rng);
    c.out_w = std::uniform_int_distribution<uint32_t>(1, 300)(rng);
    c.mirror = i % 2 == 1;
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    std::vector<uint8_t> px = TestPixels(c.w, c.h, static_cast<int>(c.pixel_bytes));
    px.resize(px.size() + transforms_internal::kInterleavedReadPadding);
    const SampleSpec planes{ElementType::kU8, 3, c.h, c.w, SampleLayout::kCHW};
    std::vector<uint8_t> expected(size_t{3} * c.out_h * c.out_w);
    transforms_internal::ResizeBilinear(planes, Planes(px, c.h, c.w, c.pixel_bytes).data(), c.top,
                                        c.left, c.win_h, c.win_w, c.out_h, c.out_w,
                                        expected.data());
    if (c.mirror) MirrorRows(expected, c.out_w);
    const InterleavedU8Image image{px.data(), c.h, c.w, c.pixel_bytes, size_t{c.w} * c.pixel_bytes};
    for (InterleavedKernel kernel : {InterleavedKernel::kAuto, InterleavedKernel::kPortable}) {
      std::vector<uint8_t> out(expected.size());
      transforms_internal::ResizeInterleavedU8(image, 3, c.top, c.left, c.win_h, c.win_w, c.out_h,
                                               c.out_w, c.mirror, out.data(), kernel);
      ASSERT_EQ(out, expected) << Describe(c)
                               << (kernel == InterleavedKernel::kAuto ? " (auto)" : " (portable)");
    }
  }
}

// ResizeInterleavedU8Region: a part of a resize, from an image holding only the source rows and
// columns that part reads, is that part of the whole resize, bit for bit, in both kernels.
TEST(InterleavedResizeTest, RegionFromAPartialImageEqualsThatPartOfTheWholeResize) {
  std::mt19937 rng(36);
  for (int i = 0; i < 80; ++i) {
    const uint32_t h = std::uniform_int_distribution<uint32_t>(1, 300)(rng);
    const uint32_t w = std::uniform_int_distribution<uint32_t>(1, 300)(rng);
    const uint32_t pb = std::vector<uint32_t>{3, 4, 1}[i % 3];
    const uint32_t oh = std::uniform_int_distribution<uint32_t>(1, 280)(rng);
    const uint32_t ow = std::uniform_int_distribution<uint32_t>(1, 280)(rng);
    const uint32_t ph = std::uniform_int_distribution<uint32_t>(1, oh)(rng);
    const uint32_t pw = std::uniform_int_distribution<uint32_t>(1, ow)(rng);
    const uint32_t py = std::uniform_int_distribution<uint32_t>(0, oh - ph)(rng);
    const uint32_t px0 = std::uniform_int_distribution<uint32_t>(0, ow - pw)(rng);
    std::vector<uint8_t> px = TestPixels(w, h, static_cast<int>(pb));
    px.resize(px.size() + transforms_internal::kInterleavedReadPadding);
    const InterleavedU8Image image{px.data(), h, w, pb, size_t{w} * pb};
    // The source rows and columns the part reads, copied alone into a smaller image.
    const float sy = static_cast<float>(h) / static_cast<float>(oh);
    const float sx = static_cast<float>(w) / static_cast<float>(ow);
    const int64_t r0 = transforms_internal::BilinearTapOf(py, sy, h).i0;
    const int64_t r1 = transforms_internal::BilinearTapOf(py + ph - 1, sy, h).i1;
    const int64_t c0 = transforms_internal::BilinearTapOf(px0, sx, w).i0;
    const int64_t c1 = transforms_internal::BilinearTapOf(px0 + pw - 1, sx, w).i1;
    const size_t sub_w = static_cast<size_t>(c1 - c0 + 1);
    std::vector<uint8_t> sub(static_cast<size_t>(r1 - r0 + 1) * sub_w * pb +
                             transforms_internal::kInterleavedReadPadding);
    for (int64_t r = r0; r <= r1; ++r) {
      std::memcpy(&sub[static_cast<size_t>(r - r0) * sub_w * pb], &px[(r * w + c0) * pb],
                  sub_w * pb);
    }
    const InterleavedU8Image part{sub.data(), static_cast<uint32_t>(r1 - r0 + 1),
                                  static_cast<uint32_t>(sub_w), pb, sub_w * pb};
    for (InterleavedKernel kernel : {InterleavedKernel::kAuto, InterleavedKernel::kPortable}) {
      std::vector<uint8_t> whole(size_t{3} * oh * ow);
      transforms_internal::ResizeInterleavedU8(image, 3, 0, 0, h, w, oh, ow, false, whole.data(),
                                               kernel);
      std::vector<uint8_t> got(size_t{3} * ph * pw);
      transforms_internal::ResizeInterleavedU8Region(part, 3, -r0, -c0, h, w, oh, ow, py, px0, ph,
                                                     pw, got.data(), kernel);
      for (uint32_t c = 0; c < 3; ++c) {
        for (uint32_t y = 0; y < ph; ++y) {
          const uint8_t* want = &whole[(size_t{c} * oh + py + y) * ow + px0];
          ASSERT_TRUE(std::equal(want, want + pw, &got[(size_t{c} * ph + y) * pw]))
              << h << "x" << w << " -> " << oh << "x" << ow << " part " << ph << "x" << pw
              << " at (" << py << ", " << px0 << ") pixel_bytes " << pb << " channel " << c
              << " row " << y;
        }
      }
    }
  }
}

absl::StatusOr<TransformChain> Chain(const std::string& text, const SampleSpec& input, bool fuse) {
  auto ops = ParseTransforms(text);
  if (!ops.ok()) return ops.status();
  return TransformChain::Create(std::move(*ops), input, fuse);
}

// `chain`'s scratch, 64-byte aligned inside `*buffer` (sized here).
char* AlignedScratch(const TransformChain& chain, std::vector<char>* buffer) {
  buffer->assign(chain.scratch_bytes() + 64, 0);
  return buffer->data() + (64 - reinterpret_cast<uintptr_t>(buffer->data()) % 64) % 64;
}

// One record through a chain; the output bytes, or the status's message.
std::string RunRecord(const TransformChain& chain, const std::string& record, uint64_t index) {
  std::vector<char> scratch;
  char* aligned = AlignedScratch(chain, &scratch);
  std::vector<float> out((chain.output_spec().bytes() + 3) / 4);
  const absl::Status s =
      chain.ApplyRecord(record.data(), record.size(), out.data(), SampleKey{7, 1, index}, aligned);
  if (!s.ok()) return std::string(s.message());
  return std::string(reinterpret_cast<const char*>(out.data()), chain.output_spec().bytes());
}

std::vector<std::string> Records() {
  std::vector<std::string> records;
  for (const auto& [w, h] :
       {std::pair{97u, 61u}, std::pair{300u, 260u}, std::pair{1u, 1u}, std::pair{8u, 200u}}) {
    records.push_back(EncodeJpeg(w, h, 3, TestPixels(w, h, 3)));
    records.push_back(EncodeJpeg(w, h, 1, TestPixels(w, h, 1)));
    records.push_back(EncodePng(w, h, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(w, h, 3)));
    records.push_back(EncodePng(w, h, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, TestPixels(w, h, 4)));
    records.push_back(EncodePng(w, h, SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, TestPixels(w, h, 2)));
    records.push_back(EncodePng(w, h, SPNG_COLOR_TYPE_GRAYSCALE, TestPixels(w, h, 1)));
  }
  return records;
}

TEST(FusedChainTest, FusesDecodeCropAndFlipOnly) {
  const SampleSpec input = EncodedSampleSpec(512, 512);
  EXPECT_EQ(Chain("DecodeImage(), RandomResizedCrop(32), RandomHorizontalFlip()", input, true)
                ->fused_ops(),
            3u);
  EXPECT_EQ(
      Chain("DecodeImage(), RandomResizedCrop(32), Normalize(0.5, 0.5)", input, true)->fused_ops(),
      2u);
  EXPECT_EQ(Chain("DecodeImage(), RandomResizedCrop(32)", input, false)->fused_ops(), 0u);
  EXPECT_EQ(Chain("DecodeImage(), CenterCrop(32)", input, true)->fused_ops(), 0u);
  EXPECT_EQ(Chain("DecodeImage(), Resize((8, 8)), RandomResizedCrop(4)", input, true)->fused_ops(),
            0u);
}

// JPEG (colour, grey), PNG (RGB, RGBA, grey+alpha, grey), modes RGB and L, flips drawn per
// index, ops after the fused ones (Normalize): the same bytes as the ops one by one.
TEST(FusedChainTest, GivesTheUnfusedChainsBytes) {
  const std::vector<std::string> records = Records();
  for (const char* text :
       {"DecodeImage(), RandomResizedCrop(48), RandomHorizontalFlip()",
        "DecodeImage(), RandomResizedCrop((224, 190), scale=(0.02, 1)), RandomHorizontalFlip(p=1), "
        "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])",
        "DecodeImage(mode=L), RandomResizedCrop(33), RandomHorizontalFlip()",
        "DecodeImage(), RandomResizedCrop(300, ratio=(0.2, 5))",
        "DecodeImage(), "
        "RandomResizedCrop(16), "
        "CenterCrop(8)"}) {
    auto fused = Chain(text, EncodedSampleSpec(400, 400), true);
    auto unfused = Chain(text, EncodedSampleSpec(400, 400), false);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE(unfused.ok()) << unfused.status();
    ASSERT_GT(fused->fused_ops(), 0u) << text;
    for (size_t r = 0; r < records.size(); ++r) {
      for (uint64_t index = 0; index < 6; ++index) {
        const std::string want = RunRecord(*unfused, records[r], index);
        ASSERT_EQ(want.size(), unfused->output_spec().bytes())
            << text << " record " << r << ": " << want;
        ASSERT_EQ(RunRecord(*fused, records[r], index), want)
            << text << " record " << r << " index " << index;
      }
    }
  }
}

// A JPEG of `subsamp` (TJSAMP_*), progressive or not, from smooth RGB pixels with noise.
std::string SubsampledJpeg(uint32_t w, uint32_t h, int subsamp, bool progressive) {
  const std::vector<uint8_t> px = TestPixels(w, h, 3);
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  std::string out;
  if (tjCompress2(tj, px.data(), static_cast<int>(w), 0, static_cast<int>(h), TJPF_RGB, &buf, &len,
                  subsamp, 90, progressive ? TJFLAG_PROGRESSIVE : 0) == 0) {
    out.assign(reinterpret_cast<char*>(buf), len);
  }
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// The fused path decodes only RandomResizedCrop's window of a JPEG (issue 36): the output is
// the unfused chain's (a whole decode, then the crop) bit for bit for every chroma subsampling
// and progressive JPEGs, in modes RGB and L, and its decode timing counts fewer pixels decoded
// than stored.
TEST(FusedChainTest, DecodesOnlyTheCropsWindowOfAJpegWithTheUnfusedBytes) {
  ASSERT_TRUE(WindowDecodeEnabled()) << "SLUICE_WINDOW_DECODE=0 is set";
  std::vector<std::string> records;
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411}) {
    for (bool progressive : {false, true}) {
      records.push_back(SubsampledJpeg(333, 250, subsamp, progressive));
      records.push_back(SubsampledJpeg(37, 29, subsamp, progressive));
    }
  }
  records.push_back(EncodeJpeg(211, 157, 1, TestPixels(211, 157, 1)));
  for (const char* text :
       {"DecodeImage(), RandomResizedCrop(24, scale=(0.02, 0.3)), RandomHorizontalFlip()",
        "DecodeImage(mode=L), RandomResizedCrop(40, scale=(0.08, 1))",
        "DecodeImage(), RandomResizedCrop((50, 20), ratio=(0.2, 5))",
        // draft (1/4 and 1/2 of the 333x250 JPEGs): the window of the reduced image
        "DecodeImage(draft=True), RandomResizedCrop(40), RandomHorizontalFlip()",
        "DecodeImage(mode=L, draft=(100, 80)), RandomResizedCrop(24)"}) {
    auto fused = Chain(text, EncodedSampleSpec(400, 400), true);
    auto unfused = Chain(text, EncodedSampleSpec(400, 400), false);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE(unfused.ok()) << unfused.status();
    uint64_t decoded = 0, stored = 0;
    for (size_t r = 0; r < records.size(); ++r) {
      ASSERT_FALSE(records[r].empty());
      for (uint64_t index = 0; index < 12; ++index) {
        const std::string want = RunRecord(*unfused, records[r], index);
        ASSERT_EQ(want.size(), unfused->output_spec().bytes()) << text << " record " << r;
        std::vector<char> scratch;
        char* aligned = AlignedScratch(*fused, &scratch);
        std::string got(fused->output_spec().bytes(), '\0');
        DecodeTiming timing;
        ASSERT_TRUE(fused
                        ->ApplyRecord(records[r].data(), records[r].size(), got.data(),
                                      SampleKey{7, 1, index}, aligned, nullptr, &timing)
                        .ok());
        ASSERT_EQ(got, want) << text << " record " << r << " index " << index;
        EXPECT_LE(timing.bytes, timing.stored_bytes);
        // The decode ceiling's decode (DecodeAsRun): the same window, the same bytes counted.
        std::vector<char> whole(fused->spec(1).bytes());
        absl::StatusOr<uint64_t> alone = fused->DecodeAsRun(
            records[r].data(), records[r].size(), whole.data(), SampleKey{7, 1, index}, aligned);
        ASSERT_TRUE(alone.ok()) << alone.status();
        EXPECT_EQ(*alone, timing.bytes) << text << " record " << r << " index " << index;
        decoded += timing.bytes;
        stored += timing.stored_bytes;
      }
    }
    EXPECT_LT(decoded, stored) << text << ": no pixel saved";
  }
}

// A draft decoded whole (no window op after it): the decode row's stored bytes are the stored
// image's, not the reduced decode's (they were the reduced size: the sixth hostile trial).
TEST(FusedChainTest, ADraftDecodedWholeCountsTheStoredImageAsStored) {
  const std::string jpeg = SubsampledJpeg(333, 250, TJSAMP_420, false);
  for (const char* text : {"DecodeImage(draft=(40, 40)), Resize((16, 16))",
                           "DecodeImage(mode=L, draft=(40, 40)), Resize((16, 16))"}) {
    SCOPED_TRACE(text);
    auto chain = Chain(text, EncodedSampleSpec(400, 400), true);
    ASSERT_TRUE(chain.ok()) << chain.status();
    const uint64_t channels = chain->output_spec().channels;
    std::vector<char> scratch;
    char* aligned = AlignedScratch(*chain, &scratch);
    std::string out(chain->output_spec().bytes(), '\0');
    DecodeTiming timing;
    ASSERT_TRUE(chain
                    ->ApplyRecord(jpeg.data(), jpeg.size(), out.data(), SampleKey{7, 1, 0}, aligned,
                                  nullptr, &timing)
                    .ok());
    // PIL's rule: min(333 // 40, 250 // 40) = 6, so 1/4: 84 x 63 decoded.
    EXPECT_EQ(timing.bytes, uint64_t{84} * 63 * channels);
    EXPECT_EQ(timing.stored_bytes, uint64_t{333} * 250 * channels);
  }
}

// One record through `chain` op by op (DecodeRecord, then ApplyDecoded) and as ApplyRecord
// runs it (a windowed decode where the chain has one), key {7, 1, 0}.
struct OpByOpAndRun {
  std::string error;    // what failed, "" when both ran
  std::string want;     // op by op
  std::string got;      // ApplyRecord
  SampleSpec decoded;   // the whole decode's spec
  DecodeTiming timing;  // ApplyRecord's decode
};
OpByOpAndRun RunBothWays(const TransformChain& chain, const std::string& record) {
  OpByOpAndRun out;
  std::vector<char> scratch;
  char* aligned = AlignedScratch(chain, &scratch);
  std::vector<char> whole(chain.scratch_bytes());
  absl::StatusOr<SampleSpec> spec =
      chain.DecodeRecord(record.data(), record.size(), whole.data(), aligned);
  if (!spec.ok()) {
    out.error = std::string(spec.status().message());
    return out;
  }
  out.decoded = *spec;
  out.want.assign(chain.output_spec().bytes(), '\0');
  absl::Status s =
      chain.ApplyDecoded(*spec, whole.data(), out.want.data(), SampleKey{7, 1, 0}, aligned);
  if (!s.ok()) {
    out.error = std::string(s.message());
    return out;
  }
  out.got.assign(chain.output_spec().bytes(), '\0');
  s = chain.ApplyRecord(record.data(), record.size(), out.got.data(), SampleKey{7, 1, 0}, aligned,
                        nullptr, &out.timing);
  if (!s.ok()) out.error = std::string(s.message());
  return out;
}

// A resize larger than the chain's intermediate is refused by the window path as the ops one by
// one refuse it (the window delivered a 1x50 strip under Resize(256), CenterCrop(224) that
// SLUICE_WINDOW_DECODE=0 refused); an upscaled small photo fits both (a 15x17 photo in a split
// of photos under 256 px was refused: the bound was 256 a side, now twice the size).
TEST(FusedChainTest, TheWindowPathRefusesAndDeliversWhatTheOpsOneByOneDo) {
  ASSERT_TRUE(WindowDecodeEnabled()) << "SLUICE_WINDOW_DECODE=0 is set";
  const char* text = "DecodeImage(), Resize(256), CenterCrop(224)";
  auto chain = Chain(text, EncodedSampleSpec(300, 300), true);
  ASSERT_TRUE(chain.ok()) << chain.status();
  const std::string strip = SubsampledJpeg(1, 50, TJSAMP_444, false);
  std::vector<char> scratch;
  char* aligned = AlignedScratch(*chain, &scratch);
  std::vector<char> whole(chain->scratch_bytes());
  absl::StatusOr<SampleSpec> decoded =
      chain->DecodeRecord(strip.data(), strip.size(), whole.data(), aligned);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  std::string out(chain->output_spec().bytes(), '\0');
  const absl::Status one_by_one =
      chain->ApplyDecoded(*decoded, whole.data(), out.data(), SampleKey{7, 1, 0}, aligned);
  const absl::Status run = chain->ApplyRecord(strip.data(), strip.size(), out.data(),
                                              SampleKey{7, 1, 0}, aligned, nullptr, nullptr);
  ASSERT_FALSE(one_by_one.ok());
  EXPECT_THAT(one_by_one.message(), ::testing::HasSubstr("more than the chain's bound"));
  EXPECT_EQ(run, one_by_one);
  for (const char* small : {text,
                            "DecodeImage(), Resize(256), RandomHorizontalFlip(), "
                            "CenterCrop(224)"}) {
    SCOPED_TRACE(small);
    auto c = Chain(small, EncodedSampleSpec(200, 200), true);
    ASSERT_TRUE(c.ok()) << c.status();
    const OpByOpAndRun both = RunBothWays(*c, SubsampledJpeg(15, 17, TJSAMP_420, false));
    ASSERT_EQ(both.error, "");
    EXPECT_EQ(both.got, both.want);
  }
}

// DecodeImage, CenterCrop decodes only the part of a JPEG the crop keeps (issue 36): the same
// bytes as the crop of the whole decoded image (DecodeRecord, then ApplyDecoded), for crops
// smaller than, equal to and larger than (padded) each side, odd and even margins, every
// subsampling, progressive and grey JPEGs, modes RGB and L.
TEST(FusedChainTest, CenterCropDecodesOnlyTheKeptPartOfAJpegWithTheSameBytes) {
  ASSERT_TRUE(WindowDecodeEnabled()) << "SLUICE_WINDOW_DECODE=0 is set";
  std::vector<std::string> records;
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411}) {
    for (bool progressive : {false, true}) {
      records.push_back(SubsampledJpeg(333, 250, subsamp, progressive));
      records.push_back(SubsampledJpeg(37, 30, subsamp, progressive));
    }
  }
  records.push_back(EncodeJpeg(211, 157, 1, TestPixels(211, 157, 1)));
  // PNGs decode their rows down to the crop's last (a view into them).
  records.push_back(EncodePng(97, 61, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(97, 61, 3)));
  records.push_back(EncodePng(80, 90, SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, TestPixels(80, 90, 2)));
  records.push_back(EncodePng(80, 90, SPNG_COLOR_TYPE_GRAYSCALE, TestPixels(80, 90, 1)));
  for (const char* text :
       {"DecodeImage(), CenterCrop(64)", "DecodeImage(), CenterCrop((31, 200))",
        "DecodeImage(mode=L), CenterCrop(37)",
        "DecodeImage(), CenterCrop(300), Normalize(0.5, 0.2)", "DecodeImage(), CenterCrop(1)"}) {
    auto chain = Chain(text, EncodedSampleSpec(400, 400), true);
    ASSERT_TRUE(chain.ok()) << chain.status();
    uint64_t decoded = 0, stored = 0;
    for (size_t r = 0; r < records.size(); ++r) {
      const OpByOpAndRun both = RunBothWays(*chain, records[r]);
      ASSERT_EQ(both.error, "") << text << " record " << r;
      ASSERT_EQ(both.got, both.want) << text << " record " << r;
      EXPECT_LE(both.timing.bytes, both.timing.stored_bytes);
      EXPECT_EQ(both.timing.stored_bytes,
                uint64_t{both.decoded.height} * both.decoded.width * both.decoded.channels);
      decoded += both.timing.bytes;
      stored += both.timing.stored_bytes;
    }
    if (std::string(text).find("300") == std::string::npos) {
      EXPECT_LT(decoded, stored) << text << ": no pixel saved";
    }
  }
}

// DecodeImage, Resize, CenterCrop decodes only the source window the crop's part of the resize
// reads, and resizes only that part (issue 36): the same bytes as the three ops one by one
// (DecodeRecord, then ApplyDecoded), downscaling and upscaling, smaller-edge and exact sizes,
// every subsampling, progressive, grey and PNG records, modes RGB and L, a draft, ops after
// it, and a crop larger than the resized image (padded: the usual way).
TEST(FusedChainTest, ResizeThenCenterCropDecodesOnlyWhatThePartReadsWithTheSameBytes) {
  ASSERT_TRUE(WindowDecodeEnabled()) << "SLUICE_WINDOW_DECODE=0 is set";
  std::vector<std::string> records;
  for (int subsamp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411}) {
    for (bool progressive : {false, true}) {
      records.push_back(SubsampledJpeg(333, 250, subsamp, progressive));
      records.push_back(SubsampledJpeg(37, 30, subsamp, progressive));
    }
  }
  records.push_back(EncodeJpeg(211, 157, 1, TestPixels(211, 157, 1)));
  records.push_back(EncodeJpeg(1, 1, 3, TestPixels(1, 1, 3)));
  records.push_back(EncodePng(97, 61, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(97, 61, 3)));
  records.push_back(EncodePng(120, 200, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, TestPixels(120, 200, 4)));
  for (const char* text :
       {"DecodeImage(), Resize(64), CenterCrop(56)",
        "DecodeImage(), Resize((40, 90)), CenterCrop((32, 77))",
        "DecodeImage(mode=L), Resize(100), CenterCrop(64), Normalize(0.5, 0.2)",
        "DecodeImage(), Resize(300), CenterCrop(224)", "DecodeImage(), Resize(29), CenterCrop(29)",
        "DecodeImage(draft=True), Resize(48), CenterCrop(48)",
        "DecodeImage(), Resize(32), CenterCrop(40)"}) {
    auto chain = Chain(text, EncodedSampleSpec(400, 400), true);
    ASSERT_TRUE(chain.ok()) << chain.status();
    uint64_t decoded = 0, stored = 0;
    for (size_t r = 0; r < records.size(); ++r) {
      const OpByOpAndRun both = RunBothWays(*chain, records[r]);
      ASSERT_EQ(both.error, "") << text << " record " << r;
      ASSERT_EQ(both.got, both.want) << text << " record " << r;
      EXPECT_LE(both.timing.bytes, both.timing.stored_bytes);
      std::vector<char> scratch;
      char* aligned = AlignedScratch(*chain, &scratch);
      std::vector<char> whole(chain->scratch_bytes());
      absl::StatusOr<uint64_t> alone = chain->DecodeAsRun(
          records[r].data(), records[r].size(), whole.data(), SampleKey{7, 1, 0}, aligned);
      ASSERT_TRUE(alone.ok()) << alone.status();
      EXPECT_EQ(*alone, both.timing.bytes) << text << " record " << r;
      decoded += both.timing.bytes;
      stored += both.timing.stored_bytes;
    }
    const std::string t(text);
    if (t.find("CenterCrop(40)") == std::string::npos && t.find("(29)") == std::string::npos) {
      EXPECT_LT(decoded, stored) << text << ": no pixel saved";
    }
  }
}

TEST(FusedChainTest, RefusedRecordNamesTheDecodeAsUnfused) {
  auto fused = Chain("DecodeImage(), RandomResizedCrop(8), RandomHorizontalFlip()",
                     EncodedSampleSpec(64, 64), true);
  ASSERT_TRUE(fused.ok()) << fused.status();
  const std::string jpeg = EncodeJpeg(40, 30, 3, TestPixels(40, 30, 3));
  EXPECT_THAT(RunRecord(*fused, jpeg.substr(0, jpeg.size() / 2), 0),
              StartsWith("DecodeImage(mode=RGB): damaged or truncated JPEG"));
  EXPECT_THAT(RunRecord(*fused, "GIF89a", 0), StartsWith("DecodeImage(mode=RGB): not a JPEG"));
  const std::string big = EncodePng(65, 10, SPNG_COLOR_TYPE_TRUECOLOR, TestPixels(65, 10, 3));
  EXPECT_THAT(RunRecord(*fused, big, 0), StartsWith("DecodeImage(mode=RGB): PNG declares 65x10"));
}

}  // namespace
}  // namespace sluice
