// EvalTransforms: the deterministic chain a test split is evaluated through when the training
// chain is random (docs/transforms.md, "Evaluation"), as torchvision's reference recipes do.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/registry.h"
#include "pipeline/transforms/transform_chain.h"
#include "pipeline/transforms/transform_spec.h"

namespace sluice {
namespace {

std::string EvalOf(const std::string& train) {
  auto spec = TransformSpec::Parse(train);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return "";
  auto eval = EvalTransforms(*spec);
  EXPECT_TRUE(eval.ok()) << eval.status();
  return eval.ok() ? eval->identity() : "";
}

std::string Canonical(const std::string& text) {
  auto spec = TransformSpec::Parse(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? spec->identity() : "";
}

// ImageNet's recipe: RandomResizedCrop(224) + flip trains, Resize(256) + CenterCrop(224)
// evaluates; the deterministic ops around them stay, a draft is sized by the new Resize.
TEST(EvalTransforms, RandomResizedCropEvaluatesAsResizeThenCenterCrop) {
  EXPECT_EQ(EvalOf("DecodeImage(), RandomResizedCrop(224), RandomHorizontalFlip(), "
                   "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])"),
            Canonical("DecodeImage(), Resize(256), CenterCrop(224), "
                      "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])"));
  // PIL's resampling (antialias=True) and bicubic carry over; a non-square crop resizes its
  // larger side's / 0.875 (the crop then fits inside).
  EXPECT_EQ(EvalOf("DecodeImage(), RandomResizedCrop((96, 128), interpolation=bicubic, "
                   "antialias=True)"),
            Canonical("DecodeImage(), Resize(146, interpolation=bicubic, antialias=True), "
                      "CenterCrop((96, 128))"));
  EXPECT_EQ(EvalOf("DecodeImage(draft=True), RandomResizedCrop(224)"),
            Canonical("DecodeImage(draft=True), Resize(256), CenterCrop(224)"));
  EXPECT_THAT(EvalOf("DecodeImage(draft=True), RandomResizedCrop(224)"),
              ::testing::StartsWith("DecodeImage(mode=RGB, draft=(256, 256))"));
  // An explicit draft is the user's: kept.
  EXPECT_THAT(EvalOf("DecodeImage(draft=300), RandomResizedCrop(224)"),
              ::testing::StartsWith("DecodeImage(mode=RGB, draft=(300, 300))"));
}

// CIFAR's recipe: RandomCrop(32, padding=4) + flip trains on 32x32 images, which evaluate as
// they are (a centre crop of 32 of a 32x32 image is the image).
TEST(EvalTransforms, RandomCropEvaluatesAsACenterCropOfItsSize) {
  const std::string eval = EvalOf("RandomCrop(32, padding=4), RandomHorizontalFlip()");
  EXPECT_EQ(eval, Canonical("CenterCrop(32)"));
  auto spec = TransformSpec::Parse(eval);
  ASSERT_TRUE(spec.ok());
  const SampleSpec input{ElementType::kU8, 3, 32, 32, SampleLayout::kCHW};
  auto chain = TransformChain::Create(*spec, input);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->output_spec(), input);
}

TEST(EvalTransforms, ADeterministicChainEvaluatesAsItTrains) {
  for (const char* text : {"Resize(72), CenterCrop(64)", "Normalize(mean=0.5, std=0.25)", ""}) {
    EXPECT_EQ(EvalOf(text), Canonical(text)) << text;
  }
  // A flip alone leaves nothing: the test split is read as stored.
  EXPECT_EQ(EvalOf("RandomHorizontalFlip()"), "");
}

// Every random op the registry knows has a deterministic form and every deterministic op is
// kept: an op is random when it draws something (Draws) for a 3x16x16 image. A new random op
// that forgot EvalForm fails here.
TEST(EvalTransforms, EveryRandomOpHasADeterministicForm) {
  const SampleSpec image{ElementType::kU8, 3, 16, 16, SampleLayout::kCHW};
  int random = 0;
  for (const TransformInfo& info : RegisteredTransforms()) {
    // Its defaults, or a size where it needs one (the crops, a blur's kernel), or ops to run.
    absl::StatusOr<TransformSpec> spec = absl::UnknownError("no form parsed");
    std::string text;
    for (const char* args : {"", "8", "3", "[RandomHorizontalFlip()]", "0.5, 0.5", "float32"}) {
      text = absl::StrCat(info.name, "(", args, ")");
      spec = TransformSpec::Parse(text);
      if (spec.ok()) break;
    }
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    const Transform& op = spec->op(0);
    bool draws = false;
    if (op.OutputSpec(image).ok()) {
      for (uint64_t i = 0; i < 8 && !draws; ++i) {
        SampleRandom rng(SampleKey{1, 0, i}, 0);
        draws = op.Draws(image, rng) != "{}";
      }
    }
    if (!draws) {
      EXPECT_EQ(op.EvalForm(), op.Identity()) << info.name << " draws nothing: kept";
      continue;
    }
    ++random;
    EXPECT_NE(op.EvalForm(), op.Identity()) << info.name;
    EXPECT_THAT(op.EvalForm(), ::testing::Not(::testing::HasSubstr("Random"))) << info.name;
  }
  EXPECT_GE(random, 8);  // the crops, the flips, RandomGrayscale, ColorJitter, RandomApply...
}

}  // namespace
}  // namespace sluice
