#include "pipeline/transforms/grayscale.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

// One RGB pixel (200, 100, 50), by hand: tensor 0.2989*200 + 0.587*100 + 0.114*50 = 124.18 ->
// 124 (truncated); PIL (200*19595 + 100*38470 + 50*7471 + 32768) >> 16 = 124.
TEST(Grayscale, TensorAndPilLumaOfOnePixel) {
  const std::vector<uint8_t> rgb = {200, 100, 50};
  const auto spec = Chw(ElementType::kU8, 3, 1, 1);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Grayscale()"), spec, rgb), (std::vector<uint8_t>{124}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Grayscale(pil=True)"), spec, rgb),
            (std::vector<uint8_t>{124}));
  // (1, 1, 1): tensor 0.9999 -> 0, PIL rounds to 1.
  const std::vector<uint8_t> ones = {1, 1, 1};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Grayscale()"), spec, ones), (std::vector<uint8_t>{0}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Grayscale(pil=True)"), spec, ones), (std::vector<uint8_t>{1}));
}

TEST(Grayscale, ThreeOutputChannelsRepeatTheGreyPlane) {
  const std::vector<uint8_t> rgb = {200, 10, 100, 20, 50, 30};  // 3 channels of 1x2
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Grayscale(3, pil=True)"), Chw(ElementType::kU8, 3, 1, 2), rgb)
                .size(),
            6u);
  const auto out = ApplyOp<uint8_t>(*OneOp("Grayscale(3)"), Chw(ElementType::kU8, 3, 1, 2), rgb);
  EXPECT_EQ(out[0], out[2]);
  EXPECT_EQ(out[1], out[5]);
  // A grey input: PIL repeats it to 3 channels; torchvision's tensor path keeps its one.
  EXPECT_EQ(OneOp("Grayscale(3, pil=True)")->OutputSpec(Chw(ElementType::kU8, 1, 4, 4))->channels,
            3u);
  EXPECT_EQ(OneOp("Grayscale(3)")->OutputSpec(Chw(ElementType::kU8, 1, 4, 4))->channels, 1u);
}

TEST(Grayscale, WhatItCannotTakeIsRefusedSayingWhatToDo) {
  EXPECT_THAT(OneOp("Grayscale()")->OutputSpec(Chw(ElementType::kU8, 4, 2, 2)).status().message(),
              ::testing::HasSubstr("expected 1 or 3 channels"));
  EXPECT_THAT(
      OneOp("Grayscale(pil=True)")->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).status().message(),
      ::testing::HasSubstr("pil=True is PIL's convert(\"L\") on u8 images"));
  EXPECT_THAT(OneOp("Grayscale()")->OutputSpec(Chw(ElementType::kF16, 3, 2, 2)).status().message(),
              ::testing::HasSubstr("put ToDtype(float32) before it"));
  auto ops = ParseTransforms("Grayscale(2)");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(), ::testing::HasSubstr("expected 1 or 3"));
}

}  // namespace
}  // namespace sluice
