#include "pipeline/transforms/transform_spec.h"

#include <string>

#include "gtest/gtest.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"

namespace sluice {
namespace {

const SampleSpec kInput{ElementType::kU8, 3, 32, 32, SampleLayout::kCHW};

TEST(TransformSpec, IdentityIsTheCanonicalChainWhateverTheSpelling) {
  auto spec = TransformSpec::Parse("RandomCrop(32,padding=4), RandomHorizontalFlip()");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->size(), 2u);
  EXPECT_EQ(spec->identity(),
            "RandomCrop(size=(32, 32), padding=(4, 4, 4, 4), pad_if_needed=False, fill=0, "
            "padding_mode=constant), RandomHorizontalFlip(p=0.5)");
  EXPECT_EQ(spec->op(1).Identity(), "RandomHorizontalFlip(p=0.5)");
  auto other = TransformSpec::Parse(spec->identity());
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->identity(), spec->identity());
  // A chain built from the spec names the same ops, byte for byte.
  auto chain = TransformChain::Create(*spec, kInput);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->Identity(), spec->identity());
}

TEST(TransformSpec, AnEmptyOrBlankTextIsNoTransforms) {
  EXPECT_TRUE(TransformSpec().empty());
  EXPECT_EQ(TransformSpec().identity(), "");
  for (const char* text : {"", " \t"}) {
    auto spec = TransformSpec::Parse(text);
    ASSERT_TRUE(spec.ok()) << text;
    EXPECT_TRUE(spec->empty()) << text;
    EXPECT_EQ(spec->identity(), "") << text;
  }
}

TEST(TransformSpec, ParseErrorsAreTheParsersUnprefixed) {
  for (const char* bad : {"Bogus()", "RandomCrop(6,", "RandomCrop(32, pading=4)"}) {
    auto spec = TransformSpec::Parse(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status(), ParseTransforms(bad).status()) << bad;
  }
}

TEST(TransformSpec, CopiesAndChainsShareTheOpsAndOutliveTheOriginal) {
  auto parsed = TransformSpec::Parse("CenterCrop(8), ToDtype(f32)");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  TransformSpec copy = *parsed;
  EXPECT_EQ(&copy.op(0), &parsed->op(0));
  auto chain = TransformChain::Create(copy, kInput);
  parsed = TransformSpec();
  copy = TransformSpec();
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->Identity(), "CenterCrop(size=(8, 8)), ToDtype(dtype=f32)");
  EXPECT_EQ(chain->output_spec().dtype, ElementType::kF32);
  EXPECT_EQ(chain->output_spec().height, 8u);
}

}  // namespace
}  // namespace sluice
