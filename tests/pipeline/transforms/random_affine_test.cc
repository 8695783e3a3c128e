#include "pipeline/transforms/random_affine.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

const RandomAffine& AsAffine(const Transform& op) { return dynamic_cast<const RandomAffine&>(op); }

std::vector<uint8_t> Ramp(uint32_t c, uint32_t h, uint32_t w) {
  std::vector<uint8_t> v(size_t{c} * h * w);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i + 1);
  return v;
}

TEST(RandomAffine, IdentityIsCanonicalAndReadsBack) {
  auto op = OneOp("RandomAffine(10)");
  EXPECT_EQ(op->Identity(),
            "RandomAffine(degrees=[-10, 10], translate=None, scale=None, shear=None, "
            "interpolation=nearest, fill=0, center=None, pil=False)");
  EXPECT_EQ(OneOp(op->Identity())->Identity(), op->Identity());
  auto full = OneOp(
      "RandomAffine((-5, 20), (0.1, 0.25), (0.75, 1.5), (1, 2, -3, 4), 'bilinear', [1, 2, 3], "
      "(4, 5), True)");
  EXPECT_EQ(full->Identity(),
            "RandomAffine(degrees=[-5, 20], translate=[0.1, 0.25], scale=[0.75, 1.5], "
            "shear=[1, 2, -3, 4], interpolation=bilinear, fill=[1, 2, 3], center=[4, 5], "
            "pil=True)");
  EXPECT_EQ(OneOp(full->Identity())->Identity(), full->Identity());
  // A shear number is the x range (-s, s).
  EXPECT_THAT(OneOp("RandomAffine(0, shear=8)")->Identity(), HasSubstr("shear=[-8, 8]"));
  EXPECT_EQ(op->EvalForm(), "");
}

TEST(RandomAffine, BadArgumentsAreRefusedNamingTheArgument) {
  const std::pair<const char*, const char*> cases[] = {
      {"RandomAffine()", "'degrees' is required"},
      {"RandomAffine(-3)", "'degrees'"},
      {"RandomAffine(0, translate=(0.5, 1.5))", "'translate'"},
      {"RandomAffine(0, translate=(-0.1, 0.1))", "'translate'"},
      {"RandomAffine(0, translate=0.1)", "'translate'"},
      {"RandomAffine(0, scale=(0, 1))", "'scale'"},
      {"RandomAffine(0, scale=(2, 1))", "'scale'"},
      {"RandomAffine(0, shear=-1)", "'shear'"},
      {"RandomAffine(0, shear=(1, 2, 3))", "'shear'"},
      {"RandomAffine(0, shear=(1, 2, 4, 3))", "'shear'"},
      {"RandomAffine(0, interpolation=bicubic)", "'interpolation'"},
      {"RandomAffine(0, fill=nan)", "'fill'"},
      {"RandomAffine(0, center=3)", "'center'"},
  };
  for (const auto& [text, needle] : cases) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("RandomAffine")) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr(needle)) << text;
  }
  auto op = OneOp("RandomAffine(0, fill=[1, 2])");
  EXPECT_FALSE(op->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).ok());
  EXPECT_TRUE(op->OutputSpec(Chw(ElementType::kU8, 2, 4, 4)).ok());
  EXPECT_FALSE(
      OneOp("RandomAffine(0, pil=True)")->OutputSpec(Chw(ElementType::kF32, 3, 4, 4)).ok());
}

TEST(RandomAffine, TheIdentityAffineReturnsTheInput) {
  const SampleSpec spec = Chw(ElementType::kU8, 3, 6, 5);
  const std::vector<uint8_t> in = Ramp(3, 6, 5);
  for (const char* pil : {"False", "True"}) {
    for (const char* mode : {"nearest", "bilinear"}) {
      auto op =
          OneOp(absl::StrCat("RandomAffine(0, translate=(0, 0), scale=(1, 1), shear=(0, 0, 0, "
                             "0), interpolation=",
                             mode, ", pil=", pil, ")"));
      EXPECT_EQ(ApplyOp<uint8_t>(*op, spec, in, 3), in) << mode << " pil=" << pil;
    }
  }
  std::vector<float> f(2 * 4 * 4);  // powers of two: torch's grid is exact (random_rotation_test)
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.25f * i;
  EXPECT_EQ(ApplyOp<float>(*OneOp("RandomAffine(0, interpolation=bilinear)"),
                           Chw(ElementType::kF32, 2, 4, 4), f),
            f);
}

TEST(RandomAffine, AHalfTurnAndAWholePixelShiftMovePixels) {
  const SampleSpec spec = Chw(ElementType::kU8, 1, 3, 3);
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (const char* pil : {"False", "True"}) {
    // F.affine's angle turns clockwise: 90 takes the left column to the top row.
    EXPECT_EQ(
        ApplyOp<uint8_t>(*OneOp(absl::StrCat("RandomAffine((90, 90), pil=", pil, ")")), spec, in),
        (std::vector<uint8_t>{7, 4, 1, 8, 5, 2, 9, 6, 3}))
        << pil;
    EXPECT_EQ(
        ApplyOp<uint8_t>(*OneOp(absl::StrCat("RandomAffine((180, 180), pil=", pil, ")")), spec, in),
        (std::vector<uint8_t>{9, 8, 7, 6, 5, 4, 3, 2, 1}))
        << pil;
  }
}

TEST(RandomAffine, DrawsFollowGetParams) {
  auto op =
      OneOp("RandomAffine((-20, 20), translate=(0.25, 0.5), scale=(0.5, 2), shear=(-5, 5, 1, 3))");
  const SampleSpec spec = Chw(ElementType::kU8, 3, 10, 8);  // W 8, H 10: |tx| <= 2, |ty| <= 5
  for (uint64_t index = 0; index < 300; ++index) {
    SampleRandom a(SampleKey{2, 1, index}, 0), b(SampleKey{2, 1, index}, 0);
    const RandomAffine::Params p = AsAffine(*op).Draw(spec, a);
    EXPECT_GE(p.angle, -20.0f);
    EXPECT_LE(p.angle, 20.0f);
    EXPECT_LE(std::abs(p.translate[0]), 2);
    EXPECT_LE(std::abs(p.translate[1]), 5);
    EXPECT_GE(p.scale, 0.5f);
    EXPECT_LE(p.scale, 2.0f);
    EXPECT_GE(p.shear[0], -5.0f);
    EXPECT_LE(p.shear[0], 5.0f);
    EXPECT_GE(p.shear[1], 1.0f);
    EXPECT_LE(p.shear[1], 3.0f);
    EXPECT_EQ(op->Draws(spec, b),
              absl::StrCat("{\"angle\": ", FormatDouble(p.angle), ", \"translate\": [",
                           p.translate[0], ", ", p.translate[1],
                           "], \"scale\": ", FormatDouble(p.scale), ", \"shear\": [",
                           FormatDouble(p.shear[0]), ", ", FormatDouble(p.shear[1]), "]}"));
    EXPECT_EQ(a.Next(), b.Next());
  }
  // Without translate, scale and shear: (0, 0), 1 and (0, 0), and one draw only.
  auto plain = OneOp("RandomAffine(10)");
  SampleRandom r(SampleKey{2, 1, 0}, 0);
  const RandomAffine::Params p = AsAffine(*plain).Draw(spec, r);
  EXPECT_EQ(p.translate[0], 0);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.shear[1], 0.0f);
  const std::vector<uint8_t> in = Ramp(3, 10, 8);
  EXPECT_EQ(ApplyOp<uint8_t>(*op, spec, in, 9), ApplyOp<uint8_t>(*op, spec, in, 9));
}

}  // namespace
}  // namespace sluice
