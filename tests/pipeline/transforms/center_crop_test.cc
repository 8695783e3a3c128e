#include "pipeline/transforms/center_crop.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

std::vector<uint8_t> Row(int w) {
  std::vector<uint8_t> v;
  for (int x = 0; x < w; ++x) v.push_back(static_cast<uint8_t>(x + 1));
  return v;
}

// The first output column's source column (values are column + 1; 0 is padding).
int Offset(int side, int crop) {
  auto op = OneOp("CenterCrop((1, " + std::to_string(crop) + "))");
  return ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 1, 1, side), Row(side))[0] - 1;
}

TEST(CenterCrop, OffsetRoundsHalvesToEvenAsPythonsRound) {
  EXPECT_EQ(Offset(10, 4), 3);  // margin 6: 3
  EXPECT_EQ(Offset(9, 4), 2);   // margin 5: round(2.5) = 2
  EXPECT_EQ(Offset(7, 4), 2);   // margin 3: round(1.5) = 2
  EXPECT_EQ(Offset(5, 4), 0);   // margin 1: round(0.5) = 0
  EXPECT_EQ(Offset(11, 4), 4);  // margin 7: round(3.5) = 4
  EXPECT_EQ(Offset(4, 4), 0);
}

TEST(CenterCrop, ACropLongerThanTheSidePadsZerosHalfBeforeTheRestAfter) {
  auto op = OneOp("CenterCrop((1, 7))");
  // 2 columns into 7: 5 of padding, 2 before and 3 after.
  EXPECT_EQ(ApplyOp<uint8_t>(*op, Chw(ElementType::kU8, 1, 1, 2), Row(2)),
            (std::vector<uint8_t>{0, 0, 1, 2, 0, 0, 0}));
}

TEST(CenterCrop, CropsEveryChannelAndBothAxes) {
  auto op = OneOp("CenterCrop(2)");
  std::vector<float> in;
  for (int i = 0; i < 2 * 4 * 4; ++i) in.push_back(static_cast<float>(i));
  // margin 2 on both axes: offset 1.
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kF32, 2, 4, 4), in),
            (std::vector<float>{5, 6, 9, 10, 21, 22, 25, 26}));
  EXPECT_EQ(op->Identity(), "CenterCrop(size=(2, 2))");
}

TEST(CenterCrop, AZeroSizeIsRefused) {
  auto ops = ParseTransforms("CenterCrop(0)");
  ASSERT_FALSE(ops.ok());
  EXPECT_NE(ops.status().message().find("expected a positive size"), std::string::npos);
}

}  // namespace
}  // namespace sluice
