#include "pipeline/transforms/random_vertical_flip.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

TEST(RandomVerticalFlip, POneReversesTheRowsOfEveryChannel) {
  auto op = OneOp("RandomVerticalFlip(p=1)");
  const std::vector<uint8_t> u8 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 2 channels of 3x2
  EXPECT_EQ(ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 2, 3, 2), u8),
            (std::vector<uint8_t>{5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8}));
  const std::vector<float> f32 = {1.5f, 2.5f, 3.5f, 4.5f};  // 1 channel of 2x2
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kF32, 1, 2, 2), f32),
            (std::vector<float>{3.5f, 4.5f, 1.5f, 2.5f}));
}

TEST(RandomVerticalFlip, HalfTheSamplesFlipAtTheDefaultAndPZeroNever) {
  auto half = OneOp("RandomVerticalFlip()");
  auto never = OneOp("RandomVerticalFlip(0)");
  const std::vector<uint8_t> in = {1, 2};  // 1 channel of 2x1
  int flipped = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const auto out = ApplyOp<uint8_t>(*half, Chw(ElementType::kU8, 1, 2, 1), in, i);
    flipped += out[0] == 2;
    ASSERT_EQ(out, ApplyOp<uint8_t>(*half, Chw(ElementType::kU8, 1, 2, 1), in, i));
    ASSERT_EQ(ApplyOp<uint8_t>(*never, Chw(ElementType::kU8, 1, 2, 1), in, i), in);
  }
  EXPECT_NEAR(flipped, 1000, 150);
  EXPECT_EQ(half->EvalForm(), "");  // evaluation flips nothing
}

TEST(RandomVerticalFlip, AProbabilityOutsideZeroToOneIsRefused) {
  auto ops = ParseTransforms("RandomVerticalFlip(p=-0.5)");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(),
              ::testing::HasSubstr("expected a probability p in [0, 1], got -0.5"));
}

}  // namespace
}  // namespace sluice
