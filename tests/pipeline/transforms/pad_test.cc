#include "pipeline/transforms/pad.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

// One row 1 2 3 padded by 2 on the left and 1 on the right in each mode (torchvision's F.pad;
// the oracle test compares whole images with it).
TEST(Pad, EachModeFillsAsTorchvisionDoes) {
  const std::vector<uint8_t> in = {1, 2, 3};
  const auto spec = Chw(ElementType::kU8, 1, 1, 3);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Pad((2, 0, 1, 0), fill=9)"), spec, in),
            (std::vector<uint8_t>{9, 9, 1, 2, 3, 9}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Pad((2, 0, 1, 0), padding_mode='edge')"), spec, in),
            (std::vector<uint8_t>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Pad((2, 0, 1, 0), padding_mode='reflect')"), spec, in),
            (std::vector<uint8_t>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Pad((2, 0, 1, 0), padding_mode='symmetric')"), spec, in),
            (std::vector<uint8_t>{2, 1, 1, 2, 3, 3}));
}

TEST(Pad, OneTwoOrFourValuesPadAsTorchvisionReadsThem) {
  const auto spec = Chw(ElementType::kF32, 2, 5, 7);
  auto out = OneOp("Pad(3)")->OutputSpec(spec);
  EXPECT_EQ(out->height, 11u);
  EXPECT_EQ(out->width, 13u);
  out = OneOp("Pad((1, 2))")->OutputSpec(spec);  // left/right 1, top/bottom 2
  EXPECT_EQ(out->height, 9u);
  EXPECT_EQ(out->width, 9u);
  out = OneOp("Pad((1, 2, 3, 4))")->OutputSpec(spec);  // left, top, right, bottom
  EXPECT_EQ(out->height, 11u);
  EXPECT_EQ(out->width, 11u);
  EXPECT_EQ(OneOp("Pad(padding=[1, 2, 3, 4], fill=0.5)")->Identity(),
            "Pad(padding=(1, 2, 3, 4), fill=0.5, padding_mode=constant)");
  EXPECT_EQ(OneOp("Pad(1)")->EvalForm(), OneOp("Pad(1)")->Identity());  // deterministic: kept
}

TEST(Pad, WhatCannotBePaddedIsRefusedSayingWhy) {
  EXPECT_THAT(
      OneOp("Pad(1, fill=300)")->OutputSpec(Chw(ElementType::kU8, 1, 4, 4)).status().message(),
      ::testing::HasSubstr("u8 samples need a fill that is an integer in [0, 255], got 300"));
  EXPECT_TRUE(OneOp("Pad(1, fill=300)")->OutputSpec(Chw(ElementType::kF32, 1, 4, 4)).ok());
  // reflect needs less than the side it mirrors, symmetric at most the side.
  EXPECT_FALSE(
      OneOp("Pad(4, padding_mode='reflect')")->OutputSpec(Chw(ElementType::kU8, 1, 4, 4)).ok());
  EXPECT_TRUE(
      OneOp("Pad(4, padding_mode='symmetric')")->OutputSpec(Chw(ElementType::kU8, 1, 4, 4)).ok());
  auto ops = ParseTransforms("Pad()");
  EXPECT_FALSE(ops.ok());
  ops = ParseTransforms("Pad(1, padding_mode='wrap')");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(), ::testing::HasSubstr("padding_mode"));
}

}  // namespace
}  // namespace sluice
