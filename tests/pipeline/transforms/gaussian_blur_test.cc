#include "pipeline/transforms/gaussian_blur.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/internal/gaussian_blur_kernel.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"
#include "tests/pipeline/transforms/encoded_images.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;
using ::testing::HasSubstr;

const GaussianBlur& AsBlur(const Transform& op) { return dynamic_cast<const GaussianBlur&>(op); }

TEST(GaussianBlur, IdentityIsCanonicalAndReadsBack) {
  auto op = OneOp("GaussianBlur(5)");
  EXPECT_EQ(op->Identity(), "GaussianBlur(kernel_size=[5, 5], sigma=[0.1, 2])");
  EXPECT_EQ(OneOp(op->Identity())->Identity(), op->Identity());
  auto pair = OneOp("GaussianBlur((5, 3), sigma=(0.5, 1.25))");
  EXPECT_EQ(pair->Identity(), "GaussianBlur(kernel_size=[5, 3], sigma=[0.5, 1.25])");
  EXPECT_EQ(OneOp(pair->Identity())->Identity(), pair->Identity());
  // A fixed sigma is the range of that one value.
  EXPECT_EQ(OneOp("GaussianBlur(kernel_size=[3], sigma=1.5)")->Identity(),
            "GaussianBlur(kernel_size=[3, 3], sigma=[1.5, 1.5])");
  EXPECT_EQ(op->EvalForm(), "");
}

TEST(GaussianBlur, BadArgumentsAreRefusedNamingTheArgument) {
  for (const char* text :
       {"GaussianBlur(4)", "GaussianBlur(0)", "GaussianBlur(-3)", "GaussianBlur((3, 4))",
        "GaussianBlur((3, 5, 7))", "GaussianBlur(257)", "GaussianBlur(2.5)", "GaussianBlur(big)"}) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("GaussianBlur argument 'kernel_size'")) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("odd and positive")) << text;
  }
  for (const char* text : {"GaussianBlur(3, 0)", "GaussianBlur(3, -1)", "GaussianBlur(3, (2, 1))",
                           "GaussianBlur(3, (0, 1))", "GaussianBlur(3, (0.1, 0.2, 0.3))",
                           "GaussianBlur(3, (0.1, inf))", "GaussianBlur(3, sigma=wide)"}) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("GaussianBlur argument 'sigma'")) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("0 < min <= max")) << text;
  }
  auto missing = ParseTransforms("GaussianBlur()");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("kernel_size"));
}

TEST(GaussianBlur, RefusesOtherDtypesLayoutsAndImagesTooSmallToReflect) {
  auto op = OneOp("GaussianBlur((5, 3))");  // pads 2 columns, 1 row
  for (ElementType t : {ElementType::kF16, ElementType::kBF16}) {
    auto s = op->OutputSpec(Chw(t, 3, 8, 8));
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("GaussianBlur: expected u8 or f32"));
    EXPECT_THAT(s.status().message(), HasSubstr("put ToDtype(float32) before it"));
  }
  SampleSpec hwc = Chw(ElementType::kU8, 3, 8, 8);
  hwc.layout = SampleLayout::kHWC;
  EXPECT_THAT(op->OutputSpec(hwc).status().message(), HasSubstr("channels-first"));
  // Reflect padding needs each pad less than the side: width > 2, height > 1.
  auto narrow = op->OutputSpec(Chw(ElementType::kU8, 1, 8, 2));
  ASSERT_FALSE(narrow.ok());
  EXPECT_THAT(narrow.status().message(), HasSubstr("8x2 image is too small"));
  EXPECT_THAT(narrow.status().message(), HasSubstr("width over 2"));
  EXPECT_FALSE(op->OutputSpec(Chw(ElementType::kF32, 1, 1, 8)).ok());
  EXPECT_TRUE(op->OutputSpec(Chw(ElementType::kF32, 1, 2, 3)).ok());
  EXPECT_EQ(*op->OutputSpec(Chw(ElementType::kU8, 4, 2, 3)), Chw(ElementType::kU8, 4, 2, 3));
  // A 1-wide kernel pads nothing: any size.
  EXPECT_TRUE(OneOp("GaussianBlur((1, 3))")->OutputSpec(Chw(ElementType::kU8, 1, 2, 1)).ok());
}

TEST(GaussianBlur, WeightsAreTorchvisionsNormalizedGaussian) {
  float w[5];
  transforms_internal::GaussianKernel1d(5, 1.0f, w);
  const double e1 = std::exp(-0.5), e2 = std::exp(-2.0), sum = 1 + 2 * e1 + 2 * e2;
  const double want[] = {e2 / sum, e1 / sum, 1 / sum, e1 / sum, e2 / sum};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(w[i], want[i], 1e-7) << i;
  EXPECT_EQ(w[0], w[4]);
  EXPECT_EQ(w[1], w[3]);
  transforms_internal::GaussianKernel1d(1, 0.3f, w);
  EXPECT_EQ(w[0], 1.0f);
}

TEST(GaussianBlur, SigmaIsDrawnInTheRangeAsFloat32AndReported) {
  auto op = OneOp("GaussianBlur(3, sigma=(0.5, 1.5))");
  float lo = 2, hi = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    SampleRandom rng(SampleKey{1, 0, i}, 0), again(SampleKey{1, 0, i}, 0);
    const float s = AsBlur(*op).Draw(rng);
    EXPECT_GE(s, 0.5f);
    EXPECT_LE(s, 1.5f);
    lo = std::min(lo, s);
    hi = std::max(hi, s);
    EXPECT_EQ(op->Draws(Chw(ElementType::kU8, 1, 4, 4), again),
              absl::StrCat("{\"sigma\": ", FormatFloat(s), "}"));
  }
  EXPECT_LT(lo, 0.51f);
  EXPECT_GT(hi, 1.49f);
  // A fixed sigma still draws once (the stream stays torchvision's shape) and gives that value.
  auto fixed = OneOp("GaussianBlur(3, sigma=0.75)");
  SampleRandom rng(SampleKey{1, 0, 3}, 0), plain(SampleKey{1, 0, 3}, 0);
  EXPECT_EQ(AsBlur(*fixed).Draw(rng), 0.75f);
  plain.Next();
  EXPECT_EQ(rng.Next(), plain.Next());
}

TEST(GaussianBlur, ConstantImagesStayConstant) {
  auto op = OneOp("GaussianBlur((7, 5), sigma=(0.1, 3))");
  const auto u8 = Chw(ElementType::kU8, 2, 6, 9);
  const std::vector<uint8_t> grey(u8.values(), 200);
  for (uint64_t i = 0; i < 20; ++i) EXPECT_EQ(ApplyOp<uint8_t>(*op, u8, grey, i), grey);
  const auto f32 = Chw(ElementType::kF32, 1, 5, 4);
  const std::vector<float> half(f32.values(), 0.5f);
  for (uint64_t i = 0; i < 20; ++i) {
    for (float v : ApplyOp<float>(*op, f32, half, i)) EXPECT_NEAR(v, 0.5f, 1e-6f);
  }
}

TEST(GaussianBlur, AnImpulseSpreadsSymmetricallyAsTheOuterProductOfTheWeights) {
  auto op = OneOp("GaussianBlur((5, 3), sigma=1)");
  const auto spec = Chw(ElementType::kF32, 1, 7, 9);
  std::vector<float> impulse(spec.values(), 0.0f);
  impulse[3 * 9 + 4] = 1.0f;  // the centre: the kernel fits without reaching the border
  const std::vector<float> out = ApplyOp<float>(*op, spec, impulse);
  float wx[5], wy[3];
  transforms_internal::GaussianKernel1d(5, 1.0f, wx);
  transforms_internal::GaussianKernel1d(3, 1.0f, wy);
  double total = 0;
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 9; ++x) {
      const float v = out[y * 9 + x];
      total += v;
      const int dy = y - 3, dx = x - 4;
      if (std::abs(dy) > 1 || std::abs(dx) > 2) {
        EXPECT_EQ(v, 0.0f) << y << "," << x;
        continue;
      }
      EXPECT_FLOAT_EQ(v, wy[dy + 1] * wx[dx + 2]) << y << "," << x;
      EXPECT_EQ(v, out[(3 - dy) * 9 + (4 - dx)]);  // point symmetric
      EXPECT_EQ(v, out[(3 - dy) * 9 + x]);         // mirror symmetric
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(GaussianBlur, ReflectPaddingMirrorsWithoutRepeatingTheEdge) {
  // The row 9 0 0 0 with kernel 3: column -1 mirrors column 1 (0), not the edge (9), so
  // out[0] = 9 w1 (edge padding would give 9 w0 + 9 w1) and out[1] = 9 w0.
  auto op = OneOp("GaussianBlur((3, 1), sigma=1)");
  const auto spec = Chw(ElementType::kF32, 1, 1, 4);
  const std::vector<float> out = ApplyOp<float>(*op, spec, std::vector<float>{9, 0, 0, 0});
  float w[3];
  transforms_internal::GaussianKernel1d(3, 1.0f, w);
  EXPECT_FLOAT_EQ(out[0], 9 * w[1]);
  EXPECT_FLOAT_EQ(out[1], 9 * w[0]);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[3], 0.0f);
}

TEST(GaussianBlur, TheSameSampleGetsTheSameOutput) {
  auto op = OneOp("GaussianBlur((3, 5))");
  const auto spec = Chw(ElementType::kU8, 3, 11, 13);
  std::vector<uint8_t> in(spec.values());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(ApplyOp<uint8_t>(*op, spec, in, i), ApplyOp<uint8_t>(*op, spec, in, i));
  }
  EXPECT_NE(ApplyOp<uint8_t>(*op, spec, in, 0), in);
  // Different samples draw different sigmas: some output differs.
  bool differs = false;
  for (uint64_t i = 1; i < 10 && !differs; ++i) {
    differs = ApplyOp<uint8_t>(*op, spec, in, i) != ApplyOp<uint8_t>(*op, spec, in, 0);
  }
  EXPECT_TRUE(differs);
  // A 1x1 kernel (weight 1) leaves a u8 sample unchanged.
  auto one = OneOp("GaussianBlur(1)");
  EXPECT_EQ(ApplyOp<uint8_t>(*one, spec, in, 4), in);
}

TEST(GaussianBlur, ApplyWithScratchEqualsApply) {
  auto op = OneOp("GaussianBlur((9, 7), sigma=(0.3, 4))");
  const auto spec = Chw(ElementType::kF32, 2, 10, 12);
  std::vector<float> in(spec.values());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7919) % 1000) / 999.0f;
  alignas(64) static float scratch[4096];
  ASSERT_LE(op->ScratchBytes(spec), sizeof(scratch));
  for (uint64_t i = 0; i < 5; ++i) {
    std::vector<float> out(spec.values());
    SampleRandom rng(SampleKey{1, 0, i}, 0);
    op->ApplyWithScratch(spec, in.data(), out.data(), rng, scratch);
    EXPECT_EQ(out, ApplyOp<float>(*op, spec, in, i));
  }
}

// After DecodeImage sizes vary: each image is blurred at its own size with the chain's scratch
// (sized from the bound), as Apply blurs it; one too small to reflect is refused.
TEST(GaussianBlur, VaryingSizesAreBlurredEachAtItsOwnSize) {
  auto op = OneOp("GaussianBlur((5, 3))");
  const SampleKey key{5, 1, 9};
  for (const auto& [w, h] : {std::pair{16u, 40u}, std::pair{60u, 9u}, std::pair{3u, 2u}}) {
    const std::string text =
        absl::StrCat("DecodeImage(), GaussianBlur((5, 3)), CenterCrop((", h, ", ", w, "))");
    auto ops = ParseTransforms(text);
    ASSERT_TRUE(ops.ok()) << ops.status();
    auto chain = TransformChain::Create(std::move(*ops), EncodedSampleSpec(64, 64));
    ASSERT_TRUE(chain.ok()) << chain.status();
    std::vector<char> scratch(chain->scratch_bytes() + 64);
    char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    const std::string png = testing::EncodePng(w, h, 2, testing::TestPixels(w, h, 3));
    std::vector<uint8_t> decoded(chain->spec(1).bytes());
    auto spec = chain->DecodeRecord(png.data(), png.size(), decoded.data(), aligned);
    ASSERT_TRUE(spec.ok()) << spec.status();
    std::vector<uint8_t> want(spec->bytes()), out(chain->output_spec().bytes());
    SampleRandom rng(key, 1);  // op 1's stream
    op->Apply(*spec, decoded.data(), want.data(), rng);
    ASSERT_TRUE(chain->ApplyRecord(png.data(), png.size(), out.data(), key, aligned).ok());
    EXPECT_EQ(out, want) << w << "x" << h;
  }
  auto ops = ParseTransforms("DecodeImage(), GaussianBlur((5, 3)), CenterCrop(1)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  auto chain = TransformChain::Create(std::move(*ops), EncodedSampleSpec(64, 64));
  ASSERT_TRUE(chain.ok()) << chain.status();
  std::vector<char> scratch(chain->scratch_bytes() + 64);
  char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  const std::string flat = testing::EncodePng(40, 1, 2, testing::TestPixels(40, 1, 3));
  std::vector<uint8_t> out(chain->output_spec().bytes());
  const absl::Status s = chain->ApplyRecord(flat.data(), flat.size(), out.data(), key, aligned);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("GaussianBlur(kernel_size=[5, 3]"));
  EXPECT_THAT(s.message(), HasSubstr("1x40 image is too small"));
}

}  // namespace
}  // namespace sluice
