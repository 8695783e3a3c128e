#include "pipeline/transforms/normalize.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/convert.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;
using ::testing::HasSubstr;

TEST(Normalize, EachChannelUsesItsOwnMeanAndStdOnU8AsToTensorThenNormalize) {
  auto op = OneOp("Normalize(mean=[0.49, 0.48, 0.45], std=[0.25, 0.24, 0.26])");
  // 3 channels of 5x7: 35 values per plane, not a multiple of the kernel's 8.
  std::vector<uint8_t> in(3 * 35);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 % 256);
  const auto out = ApplyOp<float>(*op, Chw(ElementType::kU8, 3, 5, 7), in);
  const float mean[] = {0.49f, 0.48f, 0.45f}, sd[] = {0.25f, 0.24f, 0.26f};
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t c = i / 35;
    ASSERT_EQ(out[i], NormalizeU8(in[i], Normalization{{mean[c]}, {sd[c]}})) << i;
  }
}

TEST(Normalize, F32InputIsShiftedAndScaledWithoutDividingBy255) {
  auto op = OneOp("Normalize([1, 2], [2, 4])");
  const std::vector<float> in = {3, 5, 10, 18};  // two 1x2 planes
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kF32, 2, 1, 2), in),
            (std::vector<float>{1, 2, 2, 4}));
}

TEST(Normalize, OneMeanAndStdApplyToEveryChannel) {
  auto op = OneOp("Normalize(0.5, 0.5)");
  const std::vector<uint8_t> in = {0, 255, 255, 0};
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kU8, 4, 1, 1), in),
            (std::vector<float>{-1, 1, 1, -1}));
}

TEST(Normalize, AMeanOfTheWrongLengthIsRefused) {
  auto op = OneOp("Normalize(mean=[0.5, 0.5], std=[0.2, 0.2])");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).status().message(),
              HasSubstr("have 2 values; expected one per channel (3) or one for all"));
  EXPECT_THAT(ParseTransforms("Normalize(mean=[0.5, 0.5], std=[0.2, 0.2, 0.2])").status().message(),
              HasSubstr("expected mean and std of one value per channel"));
}

TEST(Normalize, AZeroStdIsRefused) {
  EXPECT_THAT(ParseTransforms("Normalize(mean=[0.5], std=[0])").status().message(),
              HasSubstr("non-zero stds"));
}

// The values were named after their conversion to float32: "got mean [inf]" for a mean of
// 1e39, "std [0]" for a std of 1e-320. They are named as given, with what float32 makes of them.
TEST(Normalize, AValueThatFloat32CannotHoldIsNamedAsGiven) {
  std::string m(ParseTransforms("Normalize(1e39, 1)").status().message());
  EXPECT_THAT(m, HasSubstr("Normalize argument 'mean'"));
  EXPECT_THAT(m, HasSubstr(": 1e+39 is outside float32's range"));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("inf")));
  m = std::string(ParseTransforms("Normalize(mean=[0, 0], std=[1, -1e39])").status().message());
  EXPECT_THAT(m, HasSubstr("Normalize argument 'std'"));
  EXPECT_THAT(m, HasSubstr(": -1e+39 (channel 1) is outside float32's range"));
  m = std::string(ParseTransforms("Normalize(0, 1e-320)").status().message());
  EXPECT_THAT(m, HasSubstr("Normalize argument 'std'"));
  EXPECT_THAT(m, HasSubstr(": 1e-320 rounds to 0 in float32"));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("[0]")));
  // A mean that rounds to 0 is the same mean.
  EXPECT_TRUE(ParseTransforms("Normalize(1e-320, 1)").ok());
}

TEST(Normalize, StatisticsOnThe0To255ScaleAreRefusedOnU8ButNotOnF32) {
  auto op = OneOp("Normalize(mean=[125.3, 123.0, 113.9], std=[63.0, 62.1, 66.7])");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).status().message(),
              HasSubstr("mean applies to x/255 (ToTensor's scale), so it must be in [-10, 10]; "
                        "got 125.3 (channel 0)"));
  // On f32 samples the values are taken as they are: 0-255 statistics are right there.
  EXPECT_TRUE(op->OutputSpec(Chw(ElementType::kF32, 3, 4, 4)).ok());
}

TEST(Normalize, HalfPrecisionInputIsRefusedNamingTheCast) {
  auto op = OneOp("Normalize(0, 1)");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kF16, 1, 2, 2)).status().message(),
              HasSubstr("expected u8 or f32 samples, got f16 1x2x2 CHW"));
  EXPECT_EQ(op->OutputSpec(Chw(ElementType::kU8, 1, 2, 2))->dtype, ElementType::kF32);
}

TEST(Normalize, IdentityReadsBackExactly) {
  auto op = OneOp("Normalize(mean=[0.4914, 0.48216], std=[0.1, 0.3])");
  EXPECT_EQ(op->Identity(), "Normalize(mean=[0.4914, 0.48216], std=[0.1, 0.3])");
}

}  // namespace
}  // namespace sluice
