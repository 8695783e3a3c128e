#include "pipeline/transforms/random_grayscale.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;

TEST(RandomGrayscale, ConvertsWithProbabilityPKeepingTheChannels) {
  auto op = OneOp("RandomGrayscale(p=0.25)");
  const std::vector<uint8_t> rgb = {200, 100, 50};
  const auto spec = Chw(ElementType::kU8, 3, 1, 1);
  EXPECT_EQ(op->OutputSpec(spec)->channels, 3u);
  int grey = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const auto out = ApplyOp<uint8_t>(*op, spec, rgb, i);
    if (out != rgb) {
      ASSERT_EQ(out, (std::vector<uint8_t>{124, 124, 124})) << i;
      ++grey;
    }
    ASSERT_EQ(out, ApplyOp<uint8_t>(*op, spec, rgb, i));  // the draw is the sample's
  }
  EXPECT_NEAR(grey, 500, 90);
  EXPECT_EQ(op->EvalForm(), "");  // evaluation keeps the colours
}

TEST(RandomGrayscale, POneAlwaysAndPZeroNeverAndBadPIsRefused) {
  const std::vector<uint8_t> ones = {1, 1, 1};
  const auto spec = Chw(ElementType::kU8, 3, 1, 1);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomGrayscale(1, pil=True)"), spec, ones),
            (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomGrayscale(1)"), spec, ones),
            (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomGrayscale(0)"), spec, ones), ones);
  auto ops = ParseTransforms("RandomGrayscale(p=2)");
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(ops.status().message(), ::testing::HasSubstr("expected a probability p in [0, 1]"));
}

}  // namespace
}  // namespace sluice
