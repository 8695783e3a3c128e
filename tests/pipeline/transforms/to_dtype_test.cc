#include "pipeline/transforms/to_dtype.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

TEST(ToDtype, U8ToF32KeepsTheValueWithoutRescaling) {
  auto op = OneOp("ToDtype(torch.float32)");
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kU8, 1, 1, 3), std::vector<uint8_t>{0, 200, 255}),
            (std::vector<float>{0, 200, 255}));
}

TEST(ToDtype, ToU8TruncatesTowardZeroAndSaturatesOutsideTheCastsDomain) {
  auto op = OneOp("ToDtype(u8)");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {3.9f, -0.5f, 255.9f, 256.0f, -5.0f, nan, 1e9f};
  EXPECT_EQ(ApplyOp<uint8_t>(*op, Chw(ElementType::kF32, 1, 1, 7), in),
            (std::vector<uint8_t>{3, 0, 255, 255, 0, 0, 255}));
}

TEST(ToDtype, ToF16RoundsToNearestEven) {
  auto op = OneOp("ToDtype(dtype=float16)");
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even (1); 1 + 3 * 2^-11: up.
  const std::vector<float> in = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 0x1p-24f};
  EXPECT_EQ(ApplyOp<uint16_t>(*op, Chw(ElementType::kF32, 1, 1, 4), in),
            (std::vector<uint16_t>{0x3c00, 0x3c02, 0x7c00, 0x0001}));
}

TEST(ToDtype, ToBF16RoundsToNearestEvenAndKeepsNaN) {
  auto op = OneOp("ToDtype(bfloat16)");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-8 is halfway between bf16's 1 and 1 + 2^-7: to even; 1 + 3 * 2^-8: up.
  const std::vector<float> in = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, nan, -2.0f};
  EXPECT_EQ(ApplyOp<uint16_t>(*op, Chw(ElementType::kF32, 1, 1, 4), in),
            (std::vector<uint16_t>{0x3f80, 0x3f82, 0x7fc0, 0xc000}));
}

TEST(ToDtype, HalfAndBFloat16WidenExactly) {
  auto op = OneOp("ToDtype(f32)");
  // f16: 1, the smallest subnormal, -inf, 65504.
  EXPECT_EQ(ApplyOp<float>(*op, Chw(ElementType::kF16, 1, 1, 4),
                           std::vector<uint16_t>{0x3c00, 0x0001, 0xfc00, 0x7bff}),
            (std::vector<float>{1.0f, 0x1p-24f, -INFINITY, 65504.0f}));
  EXPECT_EQ(
      ApplyOp<float>(*op, Chw(ElementType::kBF16, 1, 1, 2), std::vector<uint16_t>{0x3f80, 0x4049}),
      (std::vector<float>{1.0f, 3.140625f}));
}

TEST(ToDtype, ScaleTrueAndUnknownTypesAreRefused) {
  EXPECT_THAT(ParseTransforms("ToDtype(f32, scale=True)").status().message(),
              ::testing::HasSubstr("a cast does not rescale"));
  EXPECT_THAT(ParseTransforms("ToDtype(int8)").status().message(),
              ::testing::HasSubstr("expected u8, f16, bf16 or f32, got 'int8'"));
  EXPECT_EQ(OneOp("ToDtype(torch.half)")->Identity(), "ToDtype(dtype=f16)");
}

}  // namespace
}  // namespace sluice
