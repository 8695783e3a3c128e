#include "pipeline/transforms/random_horizontal_flip.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

TEST(RandomHorizontalFlip, POneReversesEveryRowOfEveryChannel) {
  auto op = OneOp("RandomHorizontalFlip(p=1)");
  const std::vector<uint8_t> u8 = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 2x2x3
  EXPECT_EQ(ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 2, 2, 3), u8),
            (std::vector<uint8_t>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10}));
  const std::vector<uint16_t> f16 = {1, 2, 3, 4};
  EXPECT_EQ(ApplyOp<uint16_t>(*op, Chw(ElementType::kBF16, 1, 2, 2), f16),
            (std::vector<uint16_t>{2, 1, 4, 3}));
  const std::vector<float> f32 = {1.5f, 2.5f, 3.5f};
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kF32, 1, 1, 3), f32),
            (std::vector<float>{3.5f, 2.5f, 1.5f}));
}

TEST(RandomHorizontalFlip, PZeroNeverFlips) {
  auto op = OneOp("RandomHorizontalFlip(0)");
  const std::vector<uint8_t> in = {1, 2, 3};
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_EQ(ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 1, 1, 3), in, i), in);
  }
}

TEST(RandomHorizontalFlip, HalfTheSamplesFlipAtTheDefaultAndTheChoiceIsPerSample) {
  auto op = OneOp("RandomHorizontalFlip()");
  const std::vector<uint8_t> in = {1, 2};
  int flipped = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const auto out = ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 1, 1, 2), in, i);
    flipped += out[0] == 2;
    ASSERT_EQ(out, ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 1, 1, 2), in, i));
  }
  EXPECT_NEAR(flipped, 1000, 150);
}

TEST(RandomHorizontalFlip, AProbabilityOutsideZeroToOneIsRefused) {
  auto ops = ParseTransforms("RandomHorizontalFlip(p=1.5)");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(),
              ::testing::HasSubstr("RandomHorizontalFlip argument 'p' (character 24): expected a "
                                   "probability p in [0, 1], got 1.5"));
}

}  // namespace
}  // namespace sluice
