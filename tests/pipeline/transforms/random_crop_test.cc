#include "pipeline/transforms/random_crop.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;
using ::testing::HasSubstr;

// A plain image: planes of rows, built one F.pad round at a time (the reference).
struct Image {
  int c = 0, h = 0, w = 0;
  std::vector<float> v;
  float at(int ch, int y, int x) const { return v[(ch * h + y) * w + x]; }
};

int Mirror(int p, int n, const std::string& mode) {
  if (mode == "edge") return p < 0 ? 0 : n - 1;
  if (mode == "reflect") return p < 0 ? -p : 2 * (n - 1) - p;
  return p < 0 ? -p - 1 : 2 * n - 1 - p;  // symmetric
}

Image Pad(const Image& in, int l, int t, int r, int b, const std::string& mode, float fill) {
  Image out{in.c, in.h + t + b, in.w + l + r, {}};
  for (int ch = 0; ch < in.c; ++ch) {
    for (int y = 0; y < out.h; ++y) {
      for (int x = 0; x < out.w; ++x) {
        int sy = y - t, sx = x - l;
        const bool inside = sy >= 0 && sy < in.h && sx >= 0 && sx < in.w;
        if (!inside && mode == "constant") {
          out.v.push_back(fill);
          continue;
        }
        if (sy < 0 || sy >= in.h) sy = Mirror(sy, in.h, mode);
        if (sx < 0 || sx >= in.w) sx = Mirror(sx, in.w, mode);
        out.v.push_back(in.at(ch, sy, sx));
      }
    }
  }
  return out;
}

std::vector<float> Crop(const Image& in, int top, int left, int h, int w) {
  std::vector<float> out;
  for (int ch = 0; ch < in.c; ++ch) {
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) out.push_back(in.at(ch, top + y, left + x));
    }
  }
  return out;
}

// Distinct values, so a crop identifies its offset.
Image Ramp(int c, int h, int w) {
  Image im{c, h, w, {}};
  for (int i = 0; i < c * h * w; ++i) im.v.push_back(static_cast<float>(i + 1));
  return im;
}

// The offsets (top, left) at which the padded reference equals each output, over `samples`.
std::set<std::pair<int, int>> OffsetsSeen(const std::string& text, const Image& padded,
                                          const Image& src, int h, int w, int samples) {
  auto op = OneOp(text);
  std::set<std::pair<int, int>> seen;
  for (int index = 0; index < samples; ++index) {
    const auto out = ApplyOp<float>(*op, Chw(ElementType::kF32, src.c, src.h, src.w), src.v,
                                    static_cast<uint64_t>(index));
    std::vector<std::pair<int, int>> matches;
    for (int top = 0; top + h <= padded.h; ++top) {
      for (int left = 0; left + w <= padded.w; ++left) {
        if (Crop(padded, top, left, h, w) == out) matches.push_back({top, left});
      }
    }
    EXPECT_FALSE(matches.empty()) << text << " sample " << index
                                  << " is no crop of the padded image";
    if (!matches.empty()) seen.insert(matches.front());
  }
  return seen;
}

class RandomCropModes : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomCropModes, EveryOutputIsACropOfThePaddedImageAndOffsetsCoverTheRange) {
  const std::string mode = GetParam();
  const Image src = Ramp(2, 6, 7);
  // Distinct padding per side: a mix-up of left and right or top and bottom shows.
  const Image padded = Pad(src, 3, 1, 2, 4, mode, -1.0f);
  const std::string text =
      "RandomCrop((5, 6), padding=(3, 1, 2, 4), fill=-1, padding_mode=" + mode + ")";
  const auto seen = OffsetsSeen(text, padded, src, 5, 6, 600);
  // Offsets are identified uniquely only when the crop holds a distinct value; with a ramp
  // and these paddings every window differs, so all (11-5+1) x (12-6+1) offsets appear.
  EXPECT_EQ(seen.size(), static_cast<size_t>((padded.h - 5 + 1) * (padded.w - 6 + 1)));
}

TEST_P(RandomCropModes, PadIfNeededPadsAgainByTheShortfallOnBothEnds) {
  const std::string mode = GetParam();
  const Image src = Ramp(1, 4, 5);
  // padding 1 gives 6x7; a 7x9 crop pads the width by 2 on both ends and the height by 1.
  const Image once = Pad(src, 1, 1, 1, 1, mode, 0.0f);
  const Image twice = Pad(Pad(once, 2, 0, 2, 0, mode, 0.0f), 0, 1, 0, 1, mode, 0.0f);
  const std::string text =
      "RandomCrop((7, 9), padding=1, pad_if_needed=True, padding_mode=" + mode + ")";
  const auto seen = OffsetsSeen(text, twice, src, 7, 9, 300);
  EXPECT_EQ(twice.h, 8);
  EXPECT_EQ(twice.w, 11);
  EXPECT_GE(seen.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(AllModes, RandomCropModes,
                         ::testing::Values("constant", "edge", "reflect", "symmetric"));

TEST(RandomCrop, SameKeySameCropWhateverTheCallOrder) {
  auto op = OneOp("RandomCrop(4, padding=2)");
  const Image src = Ramp(3, 8, 8);
  const SampleSpec spec = Chw(ElementType::kF32, 3, 8, 8);
  std::vector<std::vector<float>> forward, backward(50);
  for (uint64_t i = 0; i < 50; ++i) forward.push_back(ApplyOp<float>(*op, spec, src.v, i));
  for (uint64_t i = 50; i-- > 0;) backward[i] = ApplyOp<float>(*op, spec, src.v, i);
  EXPECT_EQ(forward, backward);
  // Another epoch gives other crops.
  int differ = 0;
  for (uint64_t i = 0; i < 50; ++i)
    differ += ApplyOp<float>(*op, spec, src.v, i, 1, 1) != forward[i];
  EXPECT_GT(differ, 25);
}

TEST(RandomCrop, WorksOnEveryElementSize) {
  auto op = OneOp("RandomCrop(2, padding=1, fill=7)");
  const std::vector<uint8_t> u8(2 * 3 * 3, 5);
  const auto out8 = ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 2, 3, 3), u8, 3);
  for (uint8_t v : out8) EXPECT_TRUE(v == 5 || v == 7);
  const std::vector<uint16_t> f16(2 * 3 * 3, 0x3c00);  // 1.0
  const auto out16 = ApplyOp<uint16_t>(*op, Chw(ElementType::kF16, 2, 3, 3), f16, 3);
  for (uint16_t v : out16) EXPECT_TRUE(v == 0x3c00 || v == 0x4700) << v;  // 1.0 or 7.0
  EXPECT_EQ(out8.size(), 8u);
}

TEST(RandomCrop, ACropLargerThanThePaddedImageIsRefused) {
  auto op = OneOp("RandomCrop(40, padding=2)");
  auto out = op->OutputSpec(Chw(ElementType::kU8, 3, 32, 32));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("crop 40x40 is larger than the padded image 36x36"));
  EXPECT_TRUE(OneOp("RandomCrop(40, pad_if_needed=True)")
                  ->OutputSpec(Chw(ElementType::kU8, 3, 32, 32))
                  .ok());
}

TEST(RandomCrop, MirrorPaddingBeyondTheImageIsRefused) {
  const SampleSpec spec = Chw(ElementType::kU8, 1, 4, 4);
  EXPECT_THAT(
      OneOp("RandomCrop(4, padding=4, padding_mode=reflect)")->OutputSpec(spec).status().message(),
      HasSubstr("reflect padding of 4 on the height needs a height of more than 4, got 4"));
  EXPECT_TRUE(OneOp("RandomCrop(4, padding=3, padding_mode=reflect)")->OutputSpec(spec).ok());
  EXPECT_TRUE(OneOp("RandomCrop(4, padding=4, padding_mode=symmetric)")->OutputSpec(spec).ok());
  EXPECT_FALSE(OneOp("RandomCrop(4, padding=5, padding_mode=symmetric)")->OutputSpec(spec).ok());
  EXPECT_TRUE(OneOp("RandomCrop(4, padding=9, padding_mode=edge)")->OutputSpec(spec).ok());
}

TEST(RandomCrop, AFillOutsideU8IsRefusedForU8Samples) {
  auto op = OneOp("RandomCrop(4, padding=1, fill=300)");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kU8, 1, 4, 4)).status().message(),
              HasSubstr("integer in [0, 255], got 300"));
  EXPECT_TRUE(op->OutputSpec(Chw(ElementType::kF32, 1, 4, 4)).ok());
}

TEST(RandomCrop, ChannelsLastInputIsRefused) {
  SampleSpec hwc = Chw(ElementType::kU8, 3, 8, 8);
  hwc.layout = SampleLayout::kHWC;
  EXPECT_THAT(OneOp("RandomCrop(4)")->OutputSpec(hwc).status().message(),
              HasSubstr("RandomCrop: expected a channels-first (CHW) sample, got u8 3x8x8 HWC"));
}

TEST(RandomCrop, IdentityWritesEveryArgumentCanonically) {
  EXPECT_EQ(OneOp("RandomCrop(32, 4)")->Identity(),
            "RandomCrop(size=(32, 32), padding=(4, 4, 4, 4), pad_if_needed=False, fill=0, "
            "padding_mode=constant)");
  EXPECT_EQ(OneOp("RandomCrop([3, 5], padding=(1, 2), fill=0.5, padding_mode='edge')")->Identity(),
            "RandomCrop(size=(3, 5), padding=(1, 2, 1, 2), pad_if_needed=False, fill=0.5, "
            "padding_mode=edge)");
}

}  // namespace
}  // namespace sluice
