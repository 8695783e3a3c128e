#include "pipeline/transforms/random_rotation.h"

#include <cstdint>
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

const RandomRotation& AsRotation(const Transform& op) {
  return dynamic_cast<const RandomRotation&>(op);
}

// 0, 1, 2, ... in channel, row, column order.
std::vector<uint8_t> Ramp(uint32_t c, uint32_t h, uint32_t w) {
  std::vector<uint8_t> v(size_t{c} * h * w);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i + 1);
  return v;
}

TEST(RandomRotation, IdentityIsCanonicalAndReadsBack) {
  auto op = OneOp("RandomRotation(15)");
  EXPECT_EQ(op->Identity(),
            "RandomRotation(degrees=[-15, 15], interpolation=nearest, expand=False, "
            "center=None, fill=0, pil=False)");
  EXPECT_EQ(OneOp(op->Identity())->Identity(), op->Identity());
  auto full = OneOp(
      "RandomRotation((-10, 30.5), interpolation=InterpolationMode.BILINEAR, center=(3, 4.5), "
      "fill=[1, 2, 3], pil=True)");
  EXPECT_EQ(full->Identity(),
            "RandomRotation(degrees=[-10, 30.5], interpolation=bilinear, expand=False, "
            "center=[3, 4.5], fill=[1, 2, 3], pil=True)");
  EXPECT_EQ(OneOp(full->Identity())->Identity(), full->Identity());
  EXPECT_EQ(OneOp("RandomRotation(5, 'nearest', False, None, None)")->Identity(),
            "RandomRotation(degrees=[-5, 5], interpolation=nearest, expand=False, center=None, "
            "fill=0, pil=False)");
  EXPECT_EQ(op->EvalForm(), "");
}

TEST(RandomRotation, BadArgumentsAreRefusedNamingTheArgument) {
  const std::pair<const char*, const char*> cases[] = {
      {"RandomRotation(-1)", "'degrees'"},
      {"RandomRotation((10, -10))", "'degrees'"},
      {"RandomRotation((1, 2, 3))", "'degrees'"},
      {"RandomRotation(wide)", "'degrees'"},
      {"RandomRotation()", "'degrees' is required"},
      {"RandomRotation(10, interpolation=bicubic)", "'interpolation'"},
      {"RandomRotation(10, expand=True)", "'expand'"},
      {"RandomRotation(10, center=(1, 2, 3))", "'center'"},
      {"RandomRotation(10, fill=inf)", "'fill'"},
      {"RandomRotation(10, pil=maybe)", "'pil'"},
  };
  for (const auto& [text, needle] : cases) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("RandomRotation")) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr(needle)) << text;
  }
  EXPECT_THAT(ParseTransforms("RandomRotation(10, expand=True)").status().message(),
              HasSubstr("output size"));
}

TEST(RandomRotation, RefusesOtherInputs) {
  auto op = OneOp("RandomRotation(10)");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kF16, 3, 8, 8)).status().message(),
              HasSubstr("expected u8 or f32"));
  SampleSpec hwc = Chw(ElementType::kU8, 3, 8, 8);
  hwc.layout = SampleLayout::kHWC;
  EXPECT_THAT(op->OutputSpec(hwc).status().message(), HasSubstr("channels-first"));
  auto fill = OneOp("RandomRotation(10, fill=[1, 2])");
  EXPECT_THAT(fill->OutputSpec(Chw(ElementType::kU8, 3, 8, 8)).status().message(),
              HasSubstr("one per channel (3)"));
  EXPECT_THAT(OneOp("RandomRotation(10, fill=300)")
                  ->OutputSpec(Chw(ElementType::kU8, 3, 8, 8))
                  .status()
                  .message(),
              HasSubstr("[0, 255]"));
  EXPECT_TRUE(
      OneOp("RandomRotation(10, fill=300)")->OutputSpec(Chw(ElementType::kF32, 3, 8, 8)).ok());
  auto pil = OneOp("RandomRotation(10, pil=True)");
  EXPECT_THAT(pil->OutputSpec(Chw(ElementType::kF32, 3, 8, 8)).status().message(),
              HasSubstr("8-bit"));
  EXPECT_FALSE(pil->OutputSpec(Chw(ElementType::kU8, 4, 8, 8)).ok());
  // Any channel count on the tensor path; the output is the input's spec.
  EXPECT_EQ(*op->OutputSpec(Chw(ElementType::kU8, 5, 7, 9)), Chw(ElementType::kU8, 5, 7, 9));
}

TEST(RandomRotation, AngleZeroReturnsTheInput) {
  for (const char* pil : {"False", "True"}) {
    for (const char* mode : {"nearest", "bilinear"}) {
      auto op =
          OneOp(std::string("RandomRotation((0, 0), interpolation=") + mode + ", pil=" + pil + ")");
      const SampleSpec spec = Chw(ElementType::kU8, 3, 5, 7);
      const std::vector<uint8_t> in = Ramp(3, 5, 7);
      EXPECT_EQ(ApplyOp<uint8_t>(*op, spec, in), in) << mode << " pil=" << pil;
    }
  }
  // f32 bilinear: torch's grid divides by w / 2 and h / 2 in float32, exact for these sizes
  // (powers of two); elsewhere the source points miss the centres by float rounding, as torch's.
  auto f32 = OneOp("RandomRotation(0, interpolation=bilinear)");
  std::vector<float> in(2 * 4 * 8);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.1f * i;
  EXPECT_EQ(ApplyOp<float>(*f32, Chw(ElementType::kF32, 2, 4, 8), in), in);
  std::vector<float> odd(2 * 5 * 7);
  for (size_t i = 0; i < odd.size(); ++i) odd[i] = 0.1f * i;
  const std::vector<float> near = ApplyOp<float>(*f32, Chw(ElementType::kF32, 2, 5, 7), odd);
  for (size_t i = 0; i < odd.size(); ++i) EXPECT_NEAR(near[i], odd[i], 1e-5) << i;
}

TEST(RandomRotation, QuarterAndHalfTurnsMovePixels) {
  // A 3x3 square: 90 degrees counter-clockwise moves row 0 to column 0 (bottom to top).
  const SampleSpec spec = Chw(ElementType::kU8, 1, 3, 3);
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (const char* pil : {"False", "True"}) {
    EXPECT_EQ(ApplyOp<uint8_t>(*OneOp(std::string("RandomRotation((90, 90), pil=") + pil + ")"),
                               spec, in),
              (std::vector<uint8_t>{3, 6, 9, 2, 5, 8, 1, 4, 7}))
        << pil;
    EXPECT_EQ(ApplyOp<uint8_t>(*OneOp(std::string("RandomRotation((-90, -90), pil=") + pil + ")"),
                               spec, in),
              (std::vector<uint8_t>{7, 4, 1, 8, 5, 2, 9, 6, 3}))
        << pil;
    EXPECT_EQ(ApplyOp<uint8_t>(*OneOp(std::string("RandomRotation((180, 180), pil=") + pil + ")"),
                               spec, in),
              (std::vector<uint8_t>{9, 8, 7, 6, 5, 4, 3, 2, 1}))
        << pil;
  }
  // 180 degrees of a 2x4 image, two channels, f32, bilinear: every pixel centre lands on one.
  std::vector<float> f(2 * 2 * 4);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i);
  const std::vector<float> out =
      ApplyOp<float>(*OneOp("RandomRotation((180, 180), interpolation=bilinear)"),
                     Chw(ElementType::kF32, 2, 2, 4), f);
  for (size_t c = 0; c < 2; ++c) {
    for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(out[c * 8 + i], f[c * 8 + 7 - i], 1e-5) << i;
  }
}

TEST(RandomRotation, TheCornersOfAnEighthTurnAreFilled) {
  const SampleSpec spec = Chw(ElementType::kU8, 2, 9, 9);
  const std::vector<uint8_t> in(2 * 81, 100);
  const std::vector<uint8_t> out =
      ApplyOp<uint8_t>(*OneOp("RandomRotation((45, 45), fill=[7, 9])"), spec, in);
  EXPECT_EQ(out[0], 7);            // channel 0's top-left corner is outside the rotated square
  EXPECT_EQ(out[81], 9);           // channel 1's
  EXPECT_EQ(out[4 * 9 + 4], 100);  // the centre stays
}

TEST(RandomRotation, DrawsAreInRangeReproducibleAndWhatApplyUses) {
  auto op = OneOp("RandomRotation((-30, 10))");
  const SampleSpec spec = Chw(ElementType::kU8, 1, 6, 6);
  for (uint64_t index = 0; index < 200; ++index) {
    SampleRandom a(SampleKey{1, 0, index}, 0), b(SampleKey{1, 0, index}, 0);
    const float angle = AsRotation(*op).Draw(a);
    EXPECT_GE(angle, -30.0f);
    EXPECT_LE(angle, 10.0f);
    EXPECT_EQ(op->Draws(spec, b), "{\"angle\": " + FormatDouble(angle) + "}");
    EXPECT_EQ(a.Next(), b.Next());  // both consumed the same draws
  }
  const std::vector<uint8_t> in = Ramp(1, 6, 6);
  EXPECT_EQ(ApplyOp<uint8_t>(*op, spec, in, 5), ApplyOp<uint8_t>(*op, spec, in, 5));
  EXPECT_NE(ApplyOp<uint8_t>(*op, spec, in, 5), ApplyOp<uint8_t>(*op, spec, in, 6));
}

}  // namespace
}  // namespace sluice
