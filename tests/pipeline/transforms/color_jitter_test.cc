#include "pipeline/transforms/color_jitter.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/parse.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;
using ::testing::HasSubstr;

const ColorJitter& AsJitter(const Transform& op) { return dynamic_cast<const ColorJitter&>(op); }

TEST(ColorJitter, RangesAreTorchvisionsAndTheIdentityReadsBack) {
  auto op = OneOp("ColorJitter(0.4, 1.5, (0.2, 0.9), 0.1)");
  EXPECT_EQ(op->Identity(),
            "ColorJitter(brightness=[0.6, 1.4], contrast=[0, 2.5], saturation=[0.2, 0.9], "
            "hue=[-0.1, 0.1], pil=False)");
  EXPECT_EQ(OneOp(op->Identity())->Identity(), op->Identity());
  // 0, None and the centre alone leave an adjustment out.
  EXPECT_EQ(OneOp("ColorJitter(0, None, (1, 1), (0, 0), pil=True)")->Identity(),
            "ColorJitter(brightness=None, contrast=None, saturation=None, hue=None, pil=True)");
  EXPECT_EQ(op->EvalForm(), "");
}

TEST(ColorJitter, BadRangesAreRefusedNamingTheArgument) {
  for (const char* text : {"ColorJitter(-0.1)", "ColorJitter(hue=0.6)",
                           "ColorJitter(contrast=(2, 1))", "ColorJitter(hue=(-0.7, 0.1))",
                           "ColorJitter(saturation=(1, 2, 3))", "ColorJitter(brightness=red)"}) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("ColorJitter argument")) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("expected a")) << text;
  }
  auto op = OneOp("ColorJitter(0.4, pil=True)");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).status().message(),
              HasSubstr("pil=True"));
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kU8, 4, 2, 2)).status().message(),
              HasSubstr("expected 1 or 3 channels"));
}

TEST(ColorJitter, EachSampleDrawsAnOrderAndFactorsInTheRanges) {
  auto op = OneOp("ColorJitter(0.4, 0.4, None, (-0.25, 0.5))");
  std::set<std::vector<int>> orders;
  for (uint64_t i = 0; i < 2000; ++i) {
    SampleRandom rng(SampleKey{1, 0, i}, 0), again(SampleKey{1, 0, i}, 0);
    const ColorJitter::Params p = AsJitter(*op).Draw(rng);
    std::vector<int> order(p.order.begin(), p.order.end());
    EXPECT_TRUE(
        std::is_permutation(order.begin(), order.end(), std::vector<int>{0, 1, 2, 3}.begin()));
    orders.insert(order);
    ASSERT_TRUE(p.factors[0] && p.factors[1] && !p.factors[2] && p.factors[3]);
    EXPECT_GE(*p.factors[0], 0.6f);
    EXPECT_LE(*p.factors[0], 1.4f);
    EXPECT_GE(*p.factors[3], -0.25f);
    EXPECT_LE(*p.factors[3], 0.5f);
    EXPECT_EQ(AsJitter(*op).Draw(again).factors, p.factors);  // the sample's own draws
  }
  EXPECT_EQ(orders.size(), 24u);  // every order of the four
  SampleRandom rng(SampleKey{1, 0, 7}, 0);
  EXPECT_THAT(op->Draws(Chw(ElementType::kU8, 3, 2, 2), rng),
              ::testing::MatchesRegex(
                  R"(\{"order": \[[0-3], [0-3], [0-3], [0-3]\], "brightness": [0-9.e-]+, )"
                  R"("contrast": [0-9.e-]+, "saturation": null, "hue": [0-9.e-]+\})"));
}

TEST(ColorJitter, FixedFactorsGiveEachLibrarysArithmetic) {
  const auto pixel = Chw(ElementType::kU8, 3, 1, 1);
  const std::vector<uint8_t> rgb = {100, 200, 10};
  // Brightness 1.5: 150, 300 clipped to 255, 15, either way.
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(brightness=(1.5, 1.5))"), pixel, rgb),
            (std::vector<uint8_t>{150, 255, 15}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(brightness=(1.5, 1.5), pil=True)"), pixel, rgb),
            (std::vector<uint8_t>{150, 255, 15}));
  // Contrast 0.5 of [0, 101]: torch blends with the float mean 50.5 (25.25 and 75.75,
  // truncated); PIL with the mean rounded to 51 (25.5 and 76).
  const auto two = Chw(ElementType::kU8, 1, 1, 2);
  const std::vector<uint8_t> grey = {0, 101};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(contrast=(0.5, 0.5))"), two, grey),
            (std::vector<uint8_t>{25, 75}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(contrast=(0.5, 0.5), pil=True)"), two, grey),
            (std::vector<uint8_t>{25, 76}));
  // Saturation 0 is the grey image: torch's float luma truncated (148.43 -> 148), PIL's L (148).
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(saturation=(0, 0))"), pixel, rgb),
            (std::vector<uint8_t>{148, 148, 148}));
  // A third of the hue circle turns pure red green.
  const std::vector<uint8_t> red = {255, 0, 0};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(hue=(0.3333333, 0.3333333))"), pixel, red),
            (std::vector<uint8_t>{0, 255, 0}));
  // Saturation and hue leave one channel as it is.
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("ColorJitter(saturation=(0, 0), hue=0.5)"), two, grey), grey);
  // Floats in [0, 1]: brightness 2 clips at 1.
  EXPECT_EQ(ApplyOp<float>(*OneOp("ColorJitter(brightness=(2, 2))"),
                           Chw(ElementType::kF32, 1, 1, 2), std::vector<float>{0.25f, 0.75f}),
            (std::vector<float>{0.5f, 1.0f}));
}

}  // namespace
}  // namespace sluice
