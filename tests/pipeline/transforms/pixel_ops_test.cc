// RandomInvert, RandomPosterize, RandomSolarize, RandomAutocontrast, RandomEqualize and
// RandomAdjustSharpness (internal/pixel_ops.h): identities, argument checks, the p draw and a
// hand-checked value each. python/tests/test_pixel_ops.py compares them with torchvision.
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

// Each text fails to parse with an error naming the op's argument and what was expected.
void ExpectRefused(const std::vector<std::string>& texts, const std::string& op) {
  for (const std::string& text : texts) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr(op + " argument")) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("expected")) << text;
  }
}

// `text` fails to parse with an error that says `what`.
void ExpectRefusedSaying(const std::string& text, const std::string& what) {
  auto ops = ParseTransforms(text);
  ASSERT_FALSE(ops.ok()) << text;
  EXPECT_THAT(ops.status().message(), HasSubstr(what)) << text;
}

// The canonical identity reads back as itself, and evaluation leaves the op out.
void ExpectIdentity(const std::string& text, const std::string& identity) {
  auto op = OneOp(text);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->Identity(), identity);
  EXPECT_EQ(OneOp(identity)->Identity(), identity);
  EXPECT_EQ(op->EvalForm(), "");
}

// A varied u8 image: every value, 3 channels of 16x16 (each plane rolled).
std::vector<uint8_t> EveryValue() {
  std::vector<uint8_t> v(3 * 256);
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 256; ++i) v[c * 256 + i] = static_cast<uint8_t>(i + 37 * c);
  }
  return v;
}

// p=0 never changes the sample, p=1 always changes it the same way; p=0.5 applies to some
// indices and not others, each index the same way every time, and Draws says which.
// `op_text_without_p` is the op's text up to its p ("RandomInvert(", "RandomPosterize(3, ").
void ExpectDrawsByP(const std::string& op_text_without_p, const SampleSpec& spec) {
  const std::vector<uint8_t> in = EveryValue();
  auto never = OneOp(op_text_without_p + "p=0)");
  auto always = OneOp(op_text_without_p + "p=1)");
  auto half = OneOp(op_text_without_p + "p=0.5)");
  ASSERT_TRUE(never && always && half);
  const std::vector<uint8_t> applied = ApplyOp<uint8_t>(*always, spec, in, 0);
  ASSERT_NE(applied, in) << op_text_without_p;
  int changed = 0;
  for (uint64_t index = 0; index < 64; ++index) {
    EXPECT_EQ(ApplyOp<uint8_t>(*never, spec, in, index), in);
    EXPECT_EQ(ApplyOp<uint8_t>(*always, spec, in, index), applied);
    const std::vector<uint8_t> out = ApplyOp<uint8_t>(*half, spec, in, index);
    EXPECT_EQ(ApplyOp<uint8_t>(*half, spec, in, index), out);  // the same for the same index
    EXPECT_TRUE(out == in || out == applied);
    changed += out == applied;
    SampleRandom rng(SampleKey{1, 0, index}, 0);
    EXPECT_EQ(half->Draws(spec, rng),
              out == applied ? "{\"applied\": true}" : "{\"applied\": false}");
  }
  EXPECT_GT(changed, 10) << op_text_without_p;
  EXPECT_LT(changed, 54) << op_text_without_p;
}

const SampleSpec kEveryValue = Chw(ElementType::kU8, 3, 16, 16);

TEST(RandomInvert, IdentityReadsBack) {
  ExpectIdentity("RandomInvert()", "RandomInvert(p=0.5)");
  ExpectIdentity("RandomInvert(0.25)", "RandomInvert(p=0.25)");
}

TEST(RandomInvert, BadArgumentsAreRefused) {
  ExpectRefused({"RandomInvert(p=1.5)", "RandomInvert(p=-0.1)", "RandomInvert(p=red)"},
                "RandomInvert");
  auto op = OneOp("RandomInvert()");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kU8, 4, 2, 2)).status().message(),
              HasSubstr("expected 1 or 3 channels"));
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kF16, 3, 2, 2)).status().message(),
              HasSubstr("expected u8 or f32"));
}

TEST(RandomInvert, PZeroNeverPOneAlways) { ExpectDrawsByP("RandomInvert(", kEveryValue); }

TEST(RandomInvert, BoundMinusValue) {
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomInvert(p=1)"), Chw(ElementType::kU8, 1, 1, 3),
                             std::vector<uint8_t>{0, 100, 255}),
            (std::vector<uint8_t>{255, 155, 0}));
  EXPECT_EQ(ApplyOp<float>(*OneOp("RandomInvert(p=1)"), Chw(ElementType::kF32, 1, 1, 2),
                           std::vector<float>{0.25f, 1.0f}),
            (std::vector<float>{0.75f, 0.0f}));
}

TEST(RandomPosterize, IdentityReadsBack) {
  ExpectIdentity("RandomPosterize(3)", "RandomPosterize(bits=3, p=0.5)");
  ExpectIdentity("RandomPosterize(0, 1)", "RandomPosterize(bits=0, p=1)");
}

TEST(RandomPosterize, BadArgumentsAreRefused) {
  ExpectRefusedSaying("RandomPosterize()", "missing argument 'bits'");
  ExpectRefused({"RandomPosterize(9)", "RandomPosterize(-1)", "RandomPosterize(2.5)",
                 "RandomPosterize(4, p=2)"},
                "RandomPosterize");
  auto op = OneOp("RandomPosterize(4)");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).status().message(),
              HasSubstr("expected u8 samples"));
  EXPECT_TRUE(op->OutputSpec(Chw(ElementType::kU8, 1, 2, 2)).ok());
}

TEST(RandomPosterize, PZeroNeverPOneAlways) { ExpectDrawsByP("RandomPosterize(3, ", kEveryValue); }

TEST(RandomPosterize, KeepsTheHighBits) {
  const auto spec = Chw(ElementType::kU8, 1, 1, 3);
  const std::vector<uint8_t> in = {255, 100, 31};  // 0b11111111, 0b01100100, 0b00011111
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomPosterize(3, p=1)"), spec, in),
            (std::vector<uint8_t>{224, 96, 0}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomPosterize(0, p=1)"), spec, in),
            (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomPosterize(8, p=1)"), spec, in), in);
}

TEST(RandomSolarize, IdentityReadsBack) {
  ExpectIdentity("RandomSolarize(128)", "RandomSolarize(threshold=128, p=0.5)");
  ExpectIdentity("RandomSolarize(0.5, 0.3)", "RandomSolarize(threshold=0.5, p=0.3)");
}

TEST(RandomSolarize, BadArgumentsAreRefused) {
  ExpectRefusedSaying("RandomSolarize()", "missing argument 'threshold'");
  ExpectRefused({"RandomSolarize(-1)", "RandomSolarize(red)", "RandomSolarize(128, p=-1)"},
                "RandomSolarize");
  // Above the input's bound: torchvision's _assert_threshold.
  EXPECT_THAT(
      OneOp("RandomSolarize(256)")->OutputSpec(Chw(ElementType::kU8, 3, 2, 2)).status().message(),
      HasSubstr("at most 255"));
  EXPECT_THAT(
      OneOp("RandomSolarize(128)")->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).status().message(),
      HasSubstr("at most 1 for f32"));
  EXPECT_TRUE(OneOp("RandomSolarize(1)")->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).ok());
}

TEST(RandomSolarize, PZeroNeverPOneAlways) { ExpectDrawsByP("RandomSolarize(100, ", kEveryValue); }

TEST(RandomSolarize, InvertsAtAndAboveTheThreshold) {
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomSolarize(128, p=1)"), Chw(ElementType::kU8, 1, 1, 3),
                             std::vector<uint8_t>{127, 128, 200}),
            (std::vector<uint8_t>{127, 127, 55}));
  EXPECT_EQ(ApplyOp<float>(*OneOp("RandomSolarize(0.5, p=1)"), Chw(ElementType::kF32, 1, 1, 3),
                           std::vector<float>{0.25f, 0.5f, 0.75f}),
            (std::vector<float>{0.25f, 0.5f, 0.25f}));
}

TEST(RandomAutocontrast, IdentityReadsBack) {
  ExpectIdentity("RandomAutocontrast()", "RandomAutocontrast(p=0.5, pil=False)");
  ExpectIdentity("RandomAutocontrast(1, True)", "RandomAutocontrast(p=1, pil=True)");
}

TEST(RandomAutocontrast, BadArgumentsAreRefused) {
  ExpectRefused({"RandomAutocontrast(p=3)", "RandomAutocontrast(pil=maybe)"}, "RandomAutocontrast");
  EXPECT_THAT(OneOp("RandomAutocontrast(pil=True)")
                  ->OutputSpec(Chw(ElementType::kF32, 3, 2, 2))
                  .status()
                  .message(),
              HasSubstr("pil=True"));
  EXPECT_TRUE(OneOp("RandomAutocontrast()")->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).ok());
}

TEST(RandomAutocontrast, PZeroNeverPOneAlways) {
  // Every channel already spans [0, 255]: stretch a narrower image.
  auto always = OneOp("RandomAutocontrast(p=1)");
  const auto spec = Chw(ElementType::kU8, 1, 1, 3);
  const std::vector<uint8_t> in = {50, 100, 150};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAutocontrast(p=0)"), spec, in), in);
  EXPECT_EQ(ApplyOp<uint8_t>(*always, spec, in), (std::vector<uint8_t>{0, 127, 255}));
  auto half = OneOp("RandomAutocontrast(p=0.5, pil=True)");
  int changed = 0;
  for (uint64_t index = 0; index < 64; ++index) {
    const std::vector<uint8_t> out = ApplyOp<uint8_t>(*half, spec, in, index);
    EXPECT_EQ(ApplyOp<uint8_t>(*half, spec, in, index), out);
    changed += out != in;
  }
  EXPECT_GT(changed, 10);
  EXPECT_LT(changed, 54);
}

TEST(RandomAutocontrast, TensorAndPilRoundDifferently) {
  // [0, 25]: torch's float32 scale (1 / 25) * 255 takes 25 to 255.0; PIL's double
  // 25 * 10.2 is 254.99999999999997, truncated to 254.
  const auto spec = Chw(ElementType::kU8, 1, 1, 2);
  const std::vector<uint8_t> in = {0, 25};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAutocontrast(p=1)"), spec, in),
            (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAutocontrast(p=1, pil=True)"), spec, in),
            (std::vector<uint8_t>{0, 254}));
  // A channel of one value stays; f32 stretches to [0, 1].
  const std::vector<uint8_t> flat = {7, 7};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAutocontrast(p=1)"), spec, flat), flat);
  EXPECT_EQ(ApplyOp<float>(*OneOp("RandomAutocontrast(p=1)"), Chw(ElementType::kF32, 1, 1, 3),
                           std::vector<float>{0.25f, 0.5f, 0.75f}),
            (std::vector<float>{0.0f, 0.5f, 1.0f}));
}

TEST(RandomEqualize, IdentityReadsBack) {
  ExpectIdentity("RandomEqualize()", "RandomEqualize(p=0.5)");
  ExpectIdentity("RandomEqualize(p=1)", "RandomEqualize(p=1)");
}

TEST(RandomEqualize, BadArgumentsAreRefused) {
  ExpectRefused({"RandomEqualize(p=1.01)"}, "RandomEqualize");
  // PIL's equalize is the tensor path's: no pil argument.
  ExpectRefusedSaying("RandomEqualize(pil=True)", "RandomEqualize has no argument 'pil'");
  EXPECT_THAT(
      OneOp("RandomEqualize()")->OutputSpec(Chw(ElementType::kF32, 3, 2, 2)).status().message(),
      HasSubstr("expected u8 samples"));
}

TEST(RandomEqualize, PZeroNeverPOneAlways) {
  // 300 pixels each of 0, 50 and 100 (below), whose table moves 50 and 100.
  std::vector<uint8_t> in(900);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(50 * (i / 300));
  const auto spec = Chw(ElementType::kU8, 1, 30, 30);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomEqualize(p=0)"), spec, in), in);
  const std::vector<uint8_t> applied = ApplyOp<uint8_t>(*OneOp("RandomEqualize(p=1)"), spec, in);
  EXPECT_NE(applied, in);
  auto half = OneOp("RandomEqualize()");
  int changed = 0;
  for (uint64_t index = 0; index < 64; ++index) {
    const std::vector<uint8_t> out = ApplyOp<uint8_t>(*half, spec, in, index);
    EXPECT_EQ(ApplyOp<uint8_t>(*half, spec, in, index), out);
    EXPECT_TRUE(out == in || out == applied);
    changed += out == applied;
  }
  EXPECT_GT(changed, 10);
  EXPECT_LT(changed, 54);
}

TEST(RandomEqualize, TheTableOfTheHistogram) {
  // 300 pixels each of 0, 50 and 100: step = (900 - 300) // 255 = 2; 0 -> 0,
  // 50 -> (300 + 1) // 2 = 150, 100 -> (600 + 1) // 2 = 300, clipped to 255.
  std::vector<uint8_t> in(900);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(50 * (i / 300));
  const std::vector<uint8_t> out =
      ApplyOp<uint8_t>(*OneOp("RandomEqualize(p=1)"), Chw(ElementType::kU8, 1, 30, 30), in);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[300], 150);
  EXPECT_EQ(out[600], 255);
  // Fewer than 256 pixels besides the largest value's: step 0 leaves the channel.
  const std::vector<uint8_t> few = {0, 0, 1, 2};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomEqualize(p=1)"), Chw(ElementType::kU8, 1, 2, 2), few),
            few);
}

TEST(RandomAdjustSharpness, IdentityReadsBack) {
  ExpectIdentity("RandomAdjustSharpness(2)",
                 "RandomAdjustSharpness(sharpness_factor=2, p=0.5, pil=False)");
  ExpectIdentity("RandomAdjustSharpness(0.5, 1, pil=True)",
                 "RandomAdjustSharpness(sharpness_factor=0.5, p=1, pil=True)");
}

TEST(RandomAdjustSharpness, BadArgumentsAreRefused) {
  ExpectRefusedSaying("RandomAdjustSharpness()", "missing argument 'sharpness_factor'");
  ExpectRefused({"RandomAdjustSharpness(-0.5)", "RandomAdjustSharpness(1e31)",
                 "RandomAdjustSharpness(2, p=1.5)", "RandomAdjustSharpness(2, pil=2)"},
                "RandomAdjustSharpness");
  EXPECT_THAT(OneOp("RandomAdjustSharpness(2, pil=True)")
                  ->OutputSpec(Chw(ElementType::kF32, 3, 4, 4))
                  .status()
                  .message(),
              HasSubstr("pil=True"));
  EXPECT_TRUE(OneOp("RandomAdjustSharpness(2)")->OutputSpec(Chw(ElementType::kF32, 3, 4, 4)).ok());
}

TEST(RandomAdjustSharpness, PZeroNeverPOneAlways) {
  ExpectDrawsByP("RandomAdjustSharpness(2, ", kEveryValue);
  ExpectDrawsByP("RandomAdjustSharpness(0.3, pil=True, ", kEveryValue);
}

TEST(RandomAdjustSharpness, BlendsWithTheSmoothedImage) {
  // A 3x3 image of 0 with 130 in the middle: the smoothed centre is 5 * 130 / 13 = 50, the
  // border keeps its values. Factor 2: 2 * 130 - 50 = 210; factor 0: 50; either library.
  const auto spec = Chw(ElementType::kU8, 1, 3, 3);
  std::vector<uint8_t> in(9, 0);
  in[4] = 130;
  std::vector<uint8_t> sharp = in, smooth = in;
  sharp[4] = 210;
  smooth[4] = 50;
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(2, p=1)"), spec, in), sharp);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(2, p=1, pil=True)"), spec, in), sharp);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(0, p=1)"), spec, in), smooth);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(0, p=1, pil=True)"), spec, in), smooth);
  // Centre 16, factor 0.1: the smoothed 80 / 13 = 6.15 is 6 either way; torch's
  // 0.1 * 16 + 0.9 * 6 is 6.9999995 in float32, truncated to 6; PIL's 6 + 0.1 * 10 is 7.0000001.
  in[4] = 16;
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(0.1, p=1)"), spec, in)[4], 6);
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(0.1, p=1, pil=True)"), spec, in)[4], 7);
  // Two pixels high: unchanged (torchvision returns the image; PIL's filter copies it).
  const std::vector<uint8_t> strip = {0, 200, 0, 9, 100, 9};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("RandomAdjustSharpness(2, p=1)"),
                             Chw(ElementType::kU8, 1, 2, 3), strip),
            strip);
  // f32: the smoothed centre 0.5 * 5 / 13, factor 0 gives it.
  std::vector<float> f(9, 0.0f);
  f[4] = 0.5f;
  EXPECT_NEAR(ApplyOp<float>(*OneOp("RandomAdjustSharpness(0, p=1)"),
                             Chw(ElementType::kF32, 1, 3, 3), f)[4],
              2.5f / 13.0f, 1e-7f);
}

}  // namespace
}  // namespace sluice
