// PilResample's arithmetic on hand-computed cases, and its layouts agreeing with each other. The
// bitwise comparison with PIL itself (every JPEG colour kind, PNGs, RandomResizedCrop's windows)
// is python/tests/test_pil_resize.py, which has PIL to compare with.
#include "pipeline/transforms/internal/pil_resample.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::transforms_internal {
namespace {

U8ImageView Planar(const std::vector<uint8_t>& px, uint32_t channels, uint32_t h, uint32_t w) {
  return U8ImageView{px.data(), w, 1, size_t{h} * w, channels, h, w};
}

std::vector<uint8_t> Resample(const U8ImageView& v, uint32_t out_h, uint32_t out_w,
                              PilFilter filter = PilFilter::kBilinear, bool mirror = false) {
  std::vector<uint8_t> out(size_t{v.channels} * out_h * out_w, 0xAB);
  PilResample(v, out_h, out_w, filter, mirror, out.data());
  return out;
}

TEST(PilResampleTest, HalvingTwoPixelsAveragesThemRoundingHalfUp) {
  // Width 2 -> 1: scale 2, support 2, centre 1.0, taps 0 and 1 at triangle(0.25) = 0.75 each,
  // normalized to 1/2: 2^21 each. (0 + 255) x 2^21 + 2^21 (the half) >> 22 = 128.
  const std::vector<uint8_t> px = {0, 255};
  EXPECT_EQ(Resample(Planar(px, 1, 1, 2), 1, 1), std::vector<uint8_t>{128});
  // 254 -> 127.5 -> 127 + the half bit: (254 x 2^21 + 2^21) >> 22 = 127.
  const std::vector<uint8_t> even = {0, 254};
  EXPECT_EQ(Resample(Planar(even, 1, 1, 2), 1, 1), std::vector<uint8_t>{127});
}

TEST(PilResampleTest, UpscalingInterpolatesBetweenNeighbours) {
  // Width 2 -> 4: scale 0.5, support 1; output 1 has centre 0.75: taps 0 (weight 0.75) and 1
  // (0.25): 0.25 x 200 = 50; output 0 (centre 0.25) reads tap 0 alone: 0.
  const std::vector<uint8_t> px = {0, 200};
  EXPECT_EQ(Resample(Planar(px, 1, 1, 2), 1, 4), (std::vector<uint8_t>{0, 50, 150, 200}));
}

TEST(PilResampleTest, AnUnchangedSizeIsACopyAndMirrorReversesRows) {
  const std::vector<uint8_t> px = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(Resample(Planar(px, 1, 2, 3), 2, 3), px);
  EXPECT_EQ(Resample(Planar(px, 1, 2, 3), 2, 3, PilFilter::kBilinear, true),
            (std::vector<uint8_t>{3, 2, 1, 6, 5, 4}));
}

TEST(PilResampleTest, InterleavedPlanarAndGreyViewsAgree) {
  // A 3-channel 7 x 9 image, planar and interleaved; and its grey plane read three times
  // (channel stride 0) equals the one-channel resize three times.
  const uint32_t h = 7, w = 9, c = 3;
  std::vector<uint8_t> planar(size_t{c} * h * w), interleaved(size_t{c} * h * w);
  for (uint32_t ch = 0; ch < c; ++ch) {
    for (uint32_t i = 0; i < h * w; ++i) {
      const auto v = static_cast<uint8_t>((i * 37 + ch * 91) % 256);
      planar[ch * h * w + i] = v;
      interleaved[size_t{i} * c + ch] = v;
    }
  }
  const U8ImageView inter{interleaved.data(), size_t{w} * c, c, 1, c, h, w};
  for (PilFilter f : {PilFilter::kBilinear, PilFilter::kBicubic}) {
    EXPECT_EQ(Resample(Planar(planar, c, h, w), 4, 13, f), Resample(inter, 4, 13, f));
    EXPECT_EQ(Resample(Planar(planar, c, h, w), 11, 5, f, true), Resample(inter, 11, 5, f, true));
  }
  const std::vector<uint8_t> grey(planar.begin(), planar.begin() + h * w);
  const U8ImageView thrice{grey.data(), w, 1, 0, 3, h, w};
  const std::vector<uint8_t> one = Resample(Planar(grey, 1, h, w), 5, 6);
  std::vector<uint8_t> three = one;
  three.insert(three.end(), one.begin(), one.end());
  three.insert(three.end(), one.begin(), one.end());
  EXPECT_EQ(Resample(thrice, 5, 6), three);
}

TEST(PilResampleTest, AWindowOfAnImageIsResampledAsTheCropAlone) {
  // RandomResizedCrop's window: a view into the whole image equals the copied crop.
  const uint32_t h = 10, w = 12;
  std::vector<uint8_t> px(size_t{h} * w);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 13 % 251);
  const uint32_t top = 2, left = 3, wh = 6, ww = 7;
  std::vector<uint8_t> crop;
  for (uint32_t y = 0; y < wh; ++y) {
    for (uint32_t x = 0; x < ww; ++x) crop.push_back(px[(top + y) * w + left + x]);
  }
  const U8ImageView window{px.data() + top * w + left, w, 1, size_t{h} * w, 1, wh, ww};
  EXPECT_EQ(Resample(window, 3, 4), Resample(Planar(crop, 1, wh, ww), 3, 4));
}

}  // namespace
}  // namespace sluice::transforms_internal
