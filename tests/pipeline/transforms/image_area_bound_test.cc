// A chain over encoded images is bounded by the split's largest area (SampleSpec::max_pixels,
// the manifest's sample.max_pixels) as well as by its largest width and height: its scratch is
// sized from the area, an image within the box but over the area is refused from its header,
// and a bound beyond any memory is refused instead of wrapping the scratch's size around.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/sample_spec.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform_chain.h"
#include "tests/pipeline/transforms/encoded_images.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<TransformChain> Chain(const std::string& text, const SampleSpec& input) {
  auto ops = ParseTransforms(text);
  if (!ops.ok()) return ops.status();
  return TransformChain::Create(std::move(*ops), input);
}

// A split of one 60000x1 and one 1x60000 image: the box of their sides is 3.6e9 pixels (36 GB
// of scratch per preprocess thread), their largest area 60000 pixels.
TEST(ImageAreaBoundTest, ScratchIsSizedFromTheLargestAreaNotTheBoxOfTheLargestSides) {
  const SampleSpec input = EncodedSampleSpec(60000, 60000, /*max_pixels=*/60000);
  EXPECT_EQ(input.plane_values(), 60000u);
  EXPECT_EQ(SampleSpecString(input), "encoded images (at most 60000x60000, 60000 pixels)");
  for (const char* text : {"DecodeImage(), RandomResizedCrop(8)",                   // fused
                           "DecodeImage(), RandomHorizontalFlip(), CenterCrop(8)",  // not fused
                           "DecodeImage(), ToDtype(float32), Resize((8, 8))"}) {
    auto chain = Chain(text, input);
    ASSERT_TRUE(chain.ok()) << text << ": " << chain.status();
    // The decode's 4 bytes a pixel, two intermediates of up to 4 x 3 bytes a pixel, padding.
    EXPECT_LT(chain->scratch_bytes(), size_t{4 + 2 * 12} * 60000 + 65536) << text;
    // The area bound holds until an op fixes the size, then means nothing.
    EXPECT_EQ(chain->spec(1).max_pixels, 60000u) << text;
    EXPECT_EQ(chain->output_spec().max_pixels, 0u) << text;
  }
}

// Resize(s) on varying sizes changes the area: its output bound is its own box, not the area,
// of max(2s, the input's sides) a side (room for an upscaled image's long side).
TEST(ImageAreaBoundTest, ResizeOfVaryingSizesDropsTheAreaBound) {
  auto chain = Chain("DecodeImage(), Resize(16), CenterCrop(8)", EncodedSampleSpec(20, 20, 100));
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->spec(2).max_pixels, 0u);
  EXPECT_EQ(chain->spec(2).plane_values(), 32u * 32u);
  chain = Chain("DecodeImage(), Resize(16), CenterCrop(8)", EncodedSampleSpec(40, 50, 100));
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->spec(2).plane_values(), 50u * 50u);
}

std::vector<uint8_t> Grey(uint32_t width, uint32_t height) {
  std::vector<uint8_t> px(size_t{width} * height);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  return px;
}

// An image inside the box of the largest width and height but larger than the largest area
// would overrun scratch sized from the area: refused from its header, as a corrupt record.
TEST(ImageAreaBoundTest, AnImageOverTheAreaIsRefusedFromItsHeaderEvenInsideTheBox) {
  const std::string png = testing::EncodePng(30, 20, SPNG_COLOR_TYPE_GRAYSCALE, Grey(30, 20));
  const std::string jpeg = testing::EncodeJpeg(30, 20, 1, Grey(30, 20));
  ASSERT_FALSE(png.empty());
  ASSERT_FALSE(jpeg.empty());
  for (const std::string* image : {&png, &jpeg}) {
    for (const bool fused : {true, false}) {
      const char* text =
          fused ? "DecodeImage(), RandomResizedCrop(4)" : "DecodeImage(), Resize((4, 4))";
      // 30 x 20 = 600 pixels: within 40 x 40, over 599; exactly 600 decodes.
      auto tight = Chain(text, EncodedSampleSpec(40, 40, 599));
      auto fits = Chain(text, EncodedSampleSpec(40, 40, 600));
      ASSERT_TRUE(tight.ok() && fits.ok());
      std::vector<char> scratch(tight->scratch_bytes() + 64), out(3 * 4 * 4);
      absl::Status refused =
          tight->ApplyRecord(image->data(), image->size(), out.data(), SampleKey{}, scratch.data());
      EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss) << text;
      EXPECT_THAT(std::string(refused.message()),
                  HasSubstr("declares 30x20 = 600 pixels, over the bound of 599 pixels"))
          << text;
      scratch.resize(fits->scratch_bytes() + 64);
      EXPECT_TRUE(
          fits->ApplyRecord(image->data(), image->size(), out.data(), SampleKey{}, scratch.data())
              .ok())
          << text;
    }
  }
}

// 2^31 - 1 on each side (a header's largest, with no area bound): 4.6e18 pixels, whose
// intermediates and scratch add up past 2^64 bytes. Refused, rather than sized modulo 2^64.
TEST(ImageAreaBoundTest, ABoundBeyondAnyMemoryIsRefusedInsteadOfWrappingTheScratchSize) {
  const uint32_t side = 2147483647;
  auto chain = Chain("DecodeImage(), RandomResizedCrop(8)", EncodedSampleSpec(side, side));
  ASSERT_FALSE(chain.ok());
  EXPECT_EQ(chain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(chain.status().message()),
              HasSubstr("would take more than 2^48 bytes, beyond any memory"));
  // With the split's area bound the same sides are fine.
  EXPECT_TRUE(
      Chain("DecodeImage(), RandomResizedCrop(8)", EncodedSampleSpec(side, side, 1000)).ok());
}

}  // namespace
}  // namespace sluice
