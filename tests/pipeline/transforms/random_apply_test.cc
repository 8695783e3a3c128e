#include "pipeline/transforms/random_apply.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;
using ::testing::HasSubstr;

TEST(RandomApply, RunsItsOpsInTurnWithProbabilityP) {
  auto op = OneOp("RandomApply([RandomHorizontalFlip(1), RandomVerticalFlip(p=1)], p=0.3)");
  EXPECT_EQ(op->Identity(),
            "RandomApply(transforms=[RandomHorizontalFlip(p=1), RandomVerticalFlip(p=1)], "
            "p=0.3)");
  EXPECT_EQ(OneOp(op->Identity())->Identity(), op->Identity());
  const auto spec = Chw(ElementType::kU8, 1, 2, 2);
  const std::vector<uint8_t> in = {1, 2, 3, 4};
  int applied = 0;
  for (uint64_t i = 0; i < 2000; ++i) {
    const auto out = ApplyOp<uint8_t>(*op, spec, in, i);
    if (out != in) {
      ASSERT_EQ(out, (std::vector<uint8_t>{4, 3, 2, 1})) << i;  // both flips: a half turn
      ++applied;
    }
    SampleRandom rng(SampleKey{1, 0, i}, 0);
    EXPECT_EQ(op->Draws(spec, rng), out != in ? "{\"applied\": true, \"ops\": [{\"flip\": true}, "
                                                "{\"flip\": true}]}"
                                              : "{\"applied\": false}");
  }
  EXPECT_NEAR(applied, 600, 80);
  EXPECT_EQ(op->EvalForm(), "");
}

TEST(RandomApply, OpsThatChangeTheSampleOrABadPAreRefused) {
  auto resize = OneOp("RandomApply([CenterCrop(2)])");
  EXPECT_THAT(resize->OutputSpec(Chw(ElementType::kU8, 3, 4, 4)).status().message(),
              HasSubstr("a skipped RandomApply leaves the sample as it is"));
  auto bad = OneOp("RandomApply([ColorJitter(0.2, pil=True)])");
  EXPECT_THAT(bad->OutputSpec(Chw(ElementType::kF32, 3, 4, 4)).status().message(),
              HasSubstr("RandomApply: ColorJitter("));
  for (const char* text : {"RandomApply(p=0.5)", "RandomApply([RandomHorizontalFlip()], p=2)",
                           "RandomApply([1, 2])", "RandomApply([RandomCrap()])"}) {
    EXPECT_FALSE(ParseTransforms(text).ok()) << text;
  }
  EXPECT_THAT(ParseTransforms("RandomApply([RandomApply([RandomApply([RandomApply([RandomApply(["
                              "RandomHorizontalFlip()])])])])])")
                  .status()
                  .message(),
              HasSubstr("ops nest too deeply"));
}

TEST(RandomChoice, ChoosesOneOpByItsWeight) {
  auto op = OneOp(
      "RandomChoice([RandomHorizontalFlip(1), RandomVerticalFlip(1), Pad(0)], "
      "p=[3, 1, 0])");
  EXPECT_EQ(OneOp(op->Identity())->Identity(), op->Identity());
  const auto spec = Chw(ElementType::kU8, 1, 2, 2);
  const std::vector<uint8_t> in = {1, 2, 3, 4};
  int horizontal = 0, vertical = 0;
  for (uint64_t i = 0; i < 4000; ++i) {
    const auto out = ApplyOp<uint8_t>(*op, spec, in, i);
    if (out == std::vector<uint8_t>{2, 1, 4, 3}) ++horizontal;
    if (out == std::vector<uint8_t>{3, 4, 1, 2}) ++vertical;
  }
  EXPECT_EQ(horizontal + vertical, 4000);  // the zero weight's op is never chosen
  EXPECT_NEAR(horizontal, 3000, 120);
  // Choices of different shapes are refused; so are weights of the wrong number.
  EXPECT_THAT(OneOp("RandomChoice([CenterCrop(2), CenterCrop(3)])")
                  ->OutputSpec(Chw(ElementType::kU8, 1, 4, 4))
                  .status()
                  .message(),
              HasSubstr("every choice must make samples of one type and size"));
  EXPECT_THAT(ParseTransforms("RandomChoice([Pad(1), Pad(2)], p=[1])").status().message(),
              HasSubstr("2 non-negative weights"));
}

TEST(RandomApply, InAChainItUsesTheChainsScratchAndGivesTheSameSamples) {
  const std::string text =
      "RandomCrop(6, padding=1), RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1), "
      "RandomGrayscale(0.5)], p=0.8), RandomChoice([RandomHorizontalFlip(1), "
      "RandomApply([RandomVerticalFlip(1)], p=0.5)])";
  auto spec = TransformSpec::Parse(text);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const SampleSpec in = Chw(ElementType::kU8, 3, 6, 6);
  auto chain = TransformChain::Create(*spec, in);
  ASSERT_TRUE(chain.ok()) << chain.status();
  std::vector<uint8_t> src(in.bytes());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37);
  std::vector<char> scratch(chain->scratch_bytes() + 64);
  char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  int changed = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    // The chain's pass through its scratch against the ops one by one, each with its own.
    std::vector<uint8_t> chained(in.bytes()), cur = src;
    chain->Apply(src.data(), chained.data(), SampleKey{5, 1, i}, aligned);
    SampleSpec s = in;
    for (size_t k = 0; k < spec->size(); ++k) {
      const SampleSpec next = *spec->op(k).OutputSpec(s);
      std::vector<uint8_t> out(next.bytes());
      SampleRandom rng(SampleKey{5, 1, i}, k);
      spec->op(k).Apply(s, cur.data(), out.data(), rng);
      cur = std::move(out);
      s = next;
    }
    EXPECT_EQ(chained, cur) << i;
    changed += chained != src;
  }
  EXPECT_GT(changed, 40);
}

}  // namespace
}  // namespace sluice
