#include "pipeline/transforms/random_erasing.h"

#include <cmath>
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

const RandomErasing& AsErasing(const Transform& op) {
  return dynamic_cast<const RandomErasing&>(op);
}

// The window ApplyOp's sample `index` gets (ApplyOp's seed 1, epoch 0, stream 0).
RandomErasing::Params DrawFor(const Transform& op, const SampleSpec& spec, uint64_t index) {
  SampleRandom rng(SampleKey{1, 0, index}, 0);
  return AsErasing(op).Draw(spec, rng);
}

std::vector<uint8_t> Ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

bool Inside(const RandomErasing::Params& p, uint32_t y, uint32_t x) {
  return p.erase && y >= p.top && y < p.top + p.height && x >= p.left && x < p.left + p.width;
}

TEST(RandomErasing, TheIdentityIsCanonicalAndReadsBack) {
  auto op = OneOp("RandomErasing()");
  EXPECT_EQ(op->Identity(), "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)");
  EXPECT_EQ(op->EvalForm(), "");
  for (const char* text :
       {"RandomErasing()", "RandomErasing(1, (0.1, 0.2), (0.5, 2), [1, 2.5, 3], True)",
        "RandomErasing(p=0.25, value='random', inplace=False)", "RandomErasing(value=random)",
        "RandomErasing(value=[7.5])", "RandomErasing(scale=[0, 1], ratio=[1, 1])"}) {
    auto parsed = OneOp(text);
    ASSERT_NE(parsed, nullptr) << text;
    EXPECT_EQ(OneOp(parsed->Identity())->Identity(), parsed->Identity()) << text;
  }
  EXPECT_EQ(OneOp("RandomErasing(1, (0.1, 0.2), (0.5, 2), [1, 2.5, 3], True)")->Identity(),
            "RandomErasing(p=1, scale=(0.1, 0.2), ratio=(0.5, 2), value=[1, 2.5, 3])");
  EXPECT_EQ(OneOp("RandomErasing(value='random')")->Identity(),
            "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=random)");
  // A list of one is the number (torchvision's broadcast); inplace changes nothing.
  EXPECT_EQ(OneOp("RandomErasing(value=[7.5], inplace=True)")->Identity(),
            OneOp("RandomErasing(value=7.5)")->Identity());
}

TEST(RandomErasing, BadArgumentsAreRefusedNamingTheArgument) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"RandomErasing(p=1.5)", "'p'"},
      {"RandomErasing(p=-0.1)", "'p'"},
      {"RandomErasing(scale=(0.5, 0.2))", "'scale'"},
      {"RandomErasing(scale=(0.1, 1.5))", "'scale'"},
      {"RandomErasing(scale=(-0.1, 0.5))", "'scale'"},
      {"RandomErasing(scale=0.5)", "'scale'"},
      {"RandomErasing(ratio=(0, 1))", "'ratio'"},
      {"RandomErasing(ratio=(2, 1))", "'ratio'"},
      {"RandomErasing(ratio=(1, 2, 3))", "'ratio'"},
      {"RandomErasing(value=noise)", "'value'"},
      {"RandomErasing(value=[1, random])", "'value'"},
      {"RandomErasing(value=1e39)", "'value'"},
      {"RandomErasing(inplace=maybe)", "'inplace'"},
  };
  for (const auto& [text, name] : cases) {
    auto ops = ParseTransforms(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("RandomErasing argument " + name)) << text;
    EXPECT_THAT(ops.status().message(), HasSubstr("expected")) << text;
  }
  // Checks against the input.
  auto three = OneOp("RandomErasing(value=[1, 2])");
  EXPECT_THAT(three->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).status().message(),
              HasSubstr("RandomErasing argument 'value': expected one value, or one per channel"));
  EXPECT_TRUE(three->OutputSpec(Chw(ElementType::kU8, 2, 4, 4)).ok());
  for (const char* text : {"RandomErasing(value=256)", "RandomErasing(value=[0, -1, 0])"}) {
    auto op = OneOp(text);
    EXPECT_THAT(op->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).status().message(),
                HasSubstr("RandomErasing argument 'value': expected numbers in [0, 255]"))
        << text;
    EXPECT_TRUE(op->OutputSpec(Chw(ElementType::kF32, 3, 4, 4)).ok()) << text;
  }
  auto random = OneOp("RandomErasing(value=random)");
  EXPECT_THAT(random->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).status().message(),
              HasSubstr("value=random needs float samples: put it after Normalize"));
  EXPECT_TRUE(random->OutputSpec(Chw(ElementType::kF32, 3, 4, 4)).ok());
  auto op = OneOp("RandomErasing()");
  EXPECT_THAT(op->OutputSpec(Chw(ElementType::kF16, 3, 4, 4)).status().message(),
              HasSubstr("ToDtype(float32)"));
  SampleSpec hwc = Chw(ElementType::kU8, 3, 4, 4);
  hwc.layout = SampleLayout::kHWC;
  EXPECT_THAT(op->OutputSpec(hwc).status().message(), HasSubstr("channels-first"));
  // Normalize then 'random': a chain sluice accepts.
  auto chain = ParseTransforms("Normalize(0.5, 0.25), RandomErasing(value=random)");
  ASSERT_TRUE(chain.ok()) << chain.status();
  auto normalized = (*chain)[0]->OutputSpec(Chw(ElementType::kU8, 3, 8, 8));
  ASSERT_TRUE(normalized.ok());
  EXPECT_TRUE((*chain)[1]->OutputSpec(*normalized).ok());
}

TEST(RandomErasing, PZeroNeverErasesAndPOneErasesAWindowInScaleAndRatio) {
  const SampleSpec spec = Chw(ElementType::kU8, 3, 60, 90);
  auto never = OneOp("RandomErasing(p=0)");
  auto always = OneOp("RandomErasing(p=1, scale=(0.05, 0.3), ratio=(0.5, 2))");
  auto half = OneOp("RandomErasing(p=0.5, scale=(0.05, 0.3), ratio=(0.5, 2))");
  const double area = 60.0 * 90.0;
  int erased = 0, half_erased = 0;
  const int n = 2000;
  for (uint64_t i = 0; i < n; ++i) {
    SampleRandom r0(SampleKey{1, 0, i}, 0);
    EXPECT_EQ(never->Draws(spec, r0), "{\"erase\": false}");
    const RandomErasing::Params p = DrawFor(*always, spec, i);
    SampleRandom r1(SampleKey{1, 0, i}, 0);
    const std::string draws = always->Draws(spec, r1);
    if (!p.erase) {
      EXPECT_EQ(draws, "{\"erase\": false}");
      continue;
    }
    ++erased;
    EXPECT_EQ(draws, "{\"erase\": true, \"top\": " + std::to_string(p.top) + ", \"left\": " +
                         std::to_string(p.left) + ", \"height\": " + std::to_string(p.height) +
                         ", \"width\": " + std::to_string(p.width) + "}");
    EXPECT_LT(p.height, 60u);
    EXPECT_LT(p.width, 90u);
    EXPECT_LE(p.top + p.height, 60u);
    EXPECT_LE(p.left + p.width, 90u);
    // h and w are sqrt(A * r) and sqrt(A / r) rounded: A and r lie within half a pixel's bounds.
    const double h = p.height, w = p.width;
    EXPECT_LE((h - 0.5) * (w - 0.5), 0.3 * area) << draws;
    EXPECT_GE((h + 0.5) * (w + 0.5), 0.05 * area) << draws;
    EXPECT_LE((h - 0.5) / (w + 0.5), 2.0) << draws;
    EXPECT_GE((h + 0.5) / (w - 0.5), 0.5) << draws;
    half_erased += DrawFor(*half, spec, i).erase;
  }
  EXPECT_EQ(erased, n);  // these windows always fit
  EXPECT_NEAR(half_erased, n / 2, 120);
}

TEST(RandomErasing, OnlyTheWindowChangesAndItHoldsTheValue) {
  const SampleSpec spec = Chw(ElementType::kU8, 3, 20, 30);
  const std::vector<uint8_t> in = Ramp(spec.values());
  auto op = OneOp("RandomErasing(p=1, value=[10, 20.9, 255])");
  const uint8_t expected[3] = {10, 20, 255};  // truncated, as torch's assignment to uint8
  for (uint64_t i = 0; i < 50; ++i) {
    const RandomErasing::Params p = DrawFor(*op, spec, i);
    ASSERT_TRUE(p.erase);
    const std::vector<uint8_t> out = ApplyOp<uint8_t>(*op, spec, in, i);
    for (uint32_t c = 0; c < 3; ++c) {
      for (uint32_t y = 0; y < 20; ++y) {
        for (uint32_t x = 0; x < 30; ++x) {
          const size_t k = (c * 20 + y) * 30 + x;
          ASSERT_EQ(out[k], Inside(p, y, x) ? expected[c] : in[k]) << i << " " << c << y << x;
        }
      }
    }
  }
  // f32: one value for every channel, as float32.
  const SampleSpec f = Chw(ElementType::kF32, 2, 9, 7);
  std::vector<float> fin(f.values());
  for (size_t k = 0; k < fin.size(); ++k) fin[k] = 0.25f * k - 3;
  auto one = OneOp("RandomErasing(p=1, scale=(0.1, 0.5), value=-0.1)");
  for (uint64_t i = 0; i < 50; ++i) {
    const RandomErasing::Params p = DrawFor(*one, f, i);
    const std::vector<float> out = ApplyOp<float>(*one, f, fin, i);
    for (uint32_t c = 0; c < 2; ++c) {
      for (uint32_t y = 0; y < 9; ++y) {
        for (uint32_t x = 0; x < 7; ++x) {
          const size_t k = (c * 9 + y) * 7 + x;
          ASSERT_EQ(out[k], Inside(p, y, x) ? -0.1f : fin[k]) << i;
        }
      }
    }
  }
}

TEST(RandomErasing, TheSameIndexGivesTheSameOutput) {
  const SampleSpec spec = Chw(ElementType::kF32, 3, 16, 16);
  std::vector<float> in(spec.values(), 1.0f);
  auto op = OneOp("RandomErasing(p=1, value=random)");
  int differ = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(ApplyOp<float>(*op, spec, in, i), ApplyOp<float>(*op, spec, in, i));
    differ += ApplyOp<float>(*op, spec, in, i) != ApplyOp<float>(*op, spec, in, i + 1);
  }
  EXPECT_GE(differ, 19);
}

TEST(RandomErasing, RandomValuesAreStandardNormalAndDrawsConsumesAsApply) {
  const SampleSpec spec = Chw(ElementType::kF32, 3, 40, 40);
  const std::vector<float> in(spec.values(), 100.0f);  // far from any normal value
  auto op = OneOp("RandomErasing(p=1, scale=(0.2, 0.3), value=random)");
  double sum = 0, sum2 = 0;
  size_t n = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    const RandomErasing::Params p = DrawFor(*op, spec, i);
    ASSERT_TRUE(p.erase);
    std::vector<float> out(spec.values());
    SampleRandom applied(SampleKey{1, 0, i}, 0), drawn(SampleKey{1, 0, i}, 0);
    op->Apply(spec, in.data(), out.data(), applied);
    op->Draws(spec, drawn);
    EXPECT_EQ(applied.Next(), drawn.Next()) << "Draws consumed rng unlike Apply, index " << i;
    for (uint32_t c = 0; c < 3; ++c) {
      for (uint32_t y = 0; y < 40; ++y) {
        for (uint32_t x = 0; x < 40; ++x) {
          const float v = out[(c * 40 + y) * 40 + x];
          if (!Inside(p, y, x)) {
            ASSERT_EQ(v, 100.0f);
            continue;
          }
          ASSERT_TRUE(std::isfinite(v));
          sum += v;
          sum2 += double{v} * v;
          ++n;
        }
      }
    }
  }
  ASSERT_GT(n, 100000u);
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0, 0.01);
}

TEST(RandomErasing, AWindowThatNeverFitsLeavesTheSampleUnchanged) {
  // scale=(1, 1): h * w rounds from the whole area, so h < H and w < W never both hold; after
  // 10 attempts torchvision returns the image itself.
  for (const SampleSpec& spec : {Chw(ElementType::kU8, 3, 10, 10), Chw(ElementType::kU8, 1, 7, 31),
                                 Chw(ElementType::kU8, 2, 1, 1)}) {
    auto op = OneOp("RandomErasing(p=1, scale=(1, 1))");
    const std::vector<uint8_t> in = Ramp(spec.values());
    for (uint64_t i = 0; i < 100; ++i) {
      SampleRandom rng(SampleKey{1, 0, i}, 0);
      EXPECT_EQ(op->Draws(spec, rng), "{\"erase\": false}");
      EXPECT_EQ(ApplyOp<uint8_t>(*op, spec, in, i), in);
    }
  }
  // An empty window is drawn and reported, and erases nothing.
  const SampleSpec spec = Chw(ElementType::kU8, 1, 5, 5);
  auto empty = OneOp("RandomErasing(p=1, scale=(0, 0), value=9)");
  const std::vector<uint8_t> in = Ramp(spec.values());
  for (uint64_t i = 0; i < 20; ++i) {
    SampleRandom rng(SampleKey{1, 0, i}, 0);
    EXPECT_THAT(empty->Draws(spec, rng), HasSubstr("\"height\": 0, \"width\": 0"));
    EXPECT_EQ(ApplyOp<uint8_t>(*empty, spec, in, i), in);
  }
}

}  // namespace
}  // namespace sluice
