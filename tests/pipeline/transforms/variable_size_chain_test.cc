// Chains over encoded images: sizes vary until an op fixes them; a chain that never does is
// refused at start naming the ops that would.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice {
namespace {
using ::sluice::testing::EncodePng;
using ::sluice::testing::TestPixels;
using ::testing::HasSubstr;

absl::StatusOr<TransformChain> Chain(const std::string& text, const SampleSpec& input) {
  auto ops = ParseTransforms(text);
  if (!ops.ok()) return ops.status();
  return TransformChain::Create(std::move(*ops), input);
}

TEST(VariableSizeChainTest, ChainThatNeverFixesTheSizeIsRefusedNamingTheOps) {
  for (const char* text :
       {"DecodeImage()", "DecodeImage(), RandomHorizontalFlip()", "DecodeImage(), Resize(256)"}) {
    auto chain = Chain(text, EncodedSampleSpec(512, 512));
    ASSERT_FALSE(chain.ok()) << text;
    EXPECT_THAT(chain.status().message(), HasSubstr("output size varies per sample")) << text;
    EXPECT_THAT(chain.status().message(),
                HasSubstr("Resize((h, w)), RandomResizedCrop(size) or CenterCrop(size)"));
  }
}

TEST(VariableSizeChainTest, EncodedInputNeedsDecodeFirst) {
  auto empty = Chain("", EncodedSampleSpec(64, 64));
  EXPECT_THAT(empty.status().message(), HasSubstr("starts with DecodeImage(mode=RGB)"));
  auto crop = Chain("CenterCrop(4)", EncodedSampleSpec(64, 64));
  EXPECT_THAT(crop.status().message(),
              HasSubstr("CenterCrop: expected pixels, got encoded images (at most 64x64)"));
}

TEST(VariableSizeChainTest, RandomCropOnVaryingSizesIsRefusedNamingTheFix) {
  auto chain = Chain("DecodeImage(), RandomCrop(32)", EncodedSampleSpec(64, 64));
  EXPECT_THAT(chain.status().message(), HasSubstr("transform 2 of 2, RandomCrop"));
  EXPECT_THAT(chain.status().message(), HasSubstr("put Resize((h, w)), RandomResizedCrop"));
}

TEST(VariableSizeChainTest, FixingOpGivesAFixedOutputAndScratchComesFromTheBound) {
  auto chain = Chain("DecodeImage(), Resize(48), CenterCrop(32), Normalize(0.5, 0.5)",
                     EncodedSampleSpec(100, 80));
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_TRUE(chain->varies());
  EXPECT_EQ(chain->output_spec(), (SampleSpec{ElementType::kF32, 3, 32, 32, SampleLayout::kCHW}));
  EXPECT_EQ(chain->spec(1).extent, SampleExtent::kVariable);
  // Intermediates: decode's 3x100x80 and Resize(48)'s bound of 3x100x100 (u8); decode's own
  // interleaved 4 x 100 x 80 and 8 bytes of read padding (64-byte aligned).
  EXPECT_EQ(chain->scratch_bytes(), 2 * 30016 + 32064);
}

TEST(VariableSizeChainTest, EachRecordGetsItsOwnSizeUntilTheFixingOp) {
  auto chain = Chain("DecodeImage(), Resize(8), CenterCrop(8)", EncodedSampleSpec(64, 64));
  ASSERT_TRUE(chain.ok()) << chain.status();
  std::vector<char> scratch(chain->scratch_bytes() + 64);
  char* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  for (const auto& [w, h] : {std::pair{16u, 40u}, std::pair{60u, 9u}, std::pair{8u, 8u}}) {
    const std::string png = EncodePng(w, h, 2, TestPixels(w, h, 3));
    std::vector<uint8_t> out(chain->output_spec().bytes());
    EXPECT_TRUE(chain->ApplyRecord(png.data(), png.size(), out.data(), SampleKey{}, aligned).ok())
        << w << "x" << h;
  }
}

TEST(VariableSizeChainTest, RefusedRecordNamesTheOp) {
  auto chain = Chain("DecodeImage(), CenterCrop(8)", EncodedSampleSpec(64, 64));
  ASSERT_TRUE(chain.ok()) << chain.status();
  std::vector<char> scratch(chain->scratch_bytes() + 64), out(chain->output_spec().bytes());
  const absl::Status s = chain->ApplyRecord("GIF89a", 6, out.data(), SampleKey{}, scratch.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("DecodeImage(mode=RGB): not a JPEG"));
}

TEST(VariableSizeChainTest, FixedChainsRunThroughApplyRecordAndCheckTheRecordSize) {
  auto chain = Chain("RandomHorizontalFlip(p=1)", SampleSpec{ElementType::kU8, 1, 1, 3});
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_FALSE(chain->varies());
  const uint8_t in[3] = {1, 2, 3};
  uint8_t out[3] = {};
  ASSERT_TRUE(chain->ApplyRecord(in, 3, out, SampleKey{}, nullptr).ok());
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(chain->ApplyRecord(in, 2, out, SampleKey{}, nullptr).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace sluice
