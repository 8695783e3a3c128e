#include "pipeline/transforms/resize.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/random_resized_crop.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::ApplyOp;
using ::sluice::testing::Chw;
using ::sluice::testing::OneOp;
using ::testing::HasSubstr;

SampleSpec Out(const std::string& op, const SampleSpec& in) {
  auto spec = OneOp(op)->OutputSpec(in);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : SampleSpec{};
}

TEST(ResizeTest, SmallerEdgeSizeIsTorchvisions) {
  // torchvision: the smaller edge to s, the other int(s * long / short).
  EXPECT_EQ(Out("Resize(256)", Chw(ElementType::kU8, 3, 375, 500)),
            Chw(ElementType::kU8, 3, 256, 341));
  EXPECT_EQ(Out("Resize([256])", Chw(ElementType::kU8, 3, 500, 333)),
            Chw(ElementType::kU8, 3, 384, 256));
  EXPECT_EQ(Out("Resize(10, max_size=15)", Chw(ElementType::kU8, 1, 10, 40)),
            Chw(ElementType::kU8, 1, 3, 15));
  EXPECT_EQ(Out("Resize((5, 7))", Chw(ElementType::kF32, 2, 100, 3)),
            Chw(ElementType::kF32, 2, 5, 7));
}

TEST(ResizeTest, UpsamplesLikeInterpolateBilinearWithoutAlignCorners) {
  // 1x2 -> 1x4: source x = 0.5 * (d + 0.5) - 0.5 clamped at 0: 0, 0.25, 0.75, 1.25 -> (1, 1).
  const std::vector<float> out = ApplyOp<float>(
      *OneOp("Resize((1, 4))"), Chw(ElementType::kF32, 1, 1, 2), std::vector<float>{0, 8});
  EXPECT_EQ(out, (std::vector<float>{0, 2, 6, 8}));
}

TEST(ResizeTest, U8RoundsHalfToEven) {
  // 1x2 {0, 1} -> 1x4: 0, 0.25, 0.75, 1 -> 0, 0, 1, 1; {0, 2} -> 0, 0.5, 1.5, 2 -> 0, 0, 2, 2.
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Resize((1, 4))"), Chw(ElementType::kU8, 1, 1, 2),
                             std::vector<uint8_t>{0, 2}),
            (std::vector<uint8_t>{0, 0, 2, 2}));
}

TEST(ResizeTest, SameSizeIsTheInput) {
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(ApplyOp<uint8_t>(*OneOp("Resize(2)"), Chw(ElementType::kU8, 1, 2, 3), in), in);
}

TEST(ResizeTest, IdentityParsesBackAndRefusesWhatItCannotDo) {
  EXPECT_EQ(OneOp("Resize(256)")->Identity(),
            "Resize(size=256, interpolation=bilinear, max_size=None, antialias=False)");
  EXPECT_EQ(
      OneOp("Resize((3, 4), interpolation=InterpolationMode.BILINEAR, antialias=None)")->Identity(),
      "Resize(size=(3, 4), interpolation=bilinear, max_size=None, antialias=False)");
  EXPECT_THAT(ParseTransforms("Resize(8, interpolation=nearest)").status().message(),
              HasSubstr("expected bilinear"));
  // antialias=True is PIL's resampling (its own identity); anything else is refused.
  EXPECT_EQ(OneOp("Resize(8, antialias=True)")->Identity(),
            "Resize(size=8, interpolation=bilinear, max_size=None, antialias=True)");
  EXPECT_EQ(OneOp("RandomResizedCrop(8, antialias=True)")->Identity(),
            "RandomResizedCrop(size=(8, 8), scale=(0.08, 1), ratio=(0.75, 1.3333333333333333), "
            "interpolation=bilinear, antialias=True)");
  EXPECT_THAT(ParseTransforms("Resize(8, antialias=1)").status().message(),
              HasSubstr("expected True (PIL's resampling"));
  // Bicubic is PIL's only: with antialias=True, in the identity; refused on the tensor path.
  EXPECT_EQ(OneOp("Resize(8, interpolation=InterpolationMode.BICUBIC, antialias=True)")->Identity(),
            "Resize(size=8, interpolation=bicubic, max_size=None, antialias=True)");
  EXPECT_THAT(ParseTransforms("Resize(8, interpolation=bicubic)").status().message(),
              HasSubstr("bicubic with antialias=True"));
  EXPECT_THAT(ParseTransforms("RandomResizedCrop(8, interpolation=bicubic)").status().message(),
              HasSubstr("bicubic with antialias=True"));
  EXPECT_THAT(ParseTransforms("Resize(8, max_size=8)").status().message(),
              HasSubstr("must be greater than"));
}

TEST(ResizeTest, IdentitiesReadBackAsThemselves) {
  for (const char* text :
       {"Resize(256)", "Resize((3, 4))", "Resize(8, max_size=20)", "RandomResizedCrop(224)",
        "RandomResizedCrop((3, 5), (0.5, 0.7))", "DecodeImage()", "Resize(7, antialias=True)",
        "RandomResizedCrop(9, antialias=True)",
        "RandomResizedCrop(9, interpolation=bicubic, antialias=True)"}) {
    const std::string identity = OneOp(text)->Identity();
    EXPECT_EQ(OneOp(identity)->Identity(), identity) << text;
  }
  EXPECT_EQ(OneOp("RandomResizedCrop(224)")->Identity(),
            "RandomResizedCrop(size=(224, 224), scale=(0.08, 1), ratio=(0.75, "
            "1.3333333333333333), interpolation=bilinear, antialias=False)");
}

TEST(RandomResizedCropTest, WindowIsReproducibleFromSeedEpochAndIndex) {
  const auto rrc = OneOp("RandomResizedCrop(224)");
  const auto& crop = dynamic_cast<const RandomResizedCrop&>(*rrc);
  int differ = 0;
  for (uint64_t index = 0; index < 50; ++index) {
    SampleRandom a(SampleKey{7, 2, index}, 1), b(SampleKey{7, 2, index}, 1),
        other(SampleKey{7, 3, index}, 1);
    const CropWindow wa = crop.Window(375, 500, a);
    EXPECT_EQ(wa, crop.Window(375, 500, b));
    differ += wa == crop.Window(375, 500, other) ? 0 : 1;
  }
  EXPECT_GT(differ, 45);
}

TEST(RandomResizedCropTest, WindowsStayWithinTorchvisionsRanges) {
  const auto rrc =
      OneOp("RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(0.75, 1.3333333333333333))");
  const auto& crop = dynamic_cast<const RandomResizedCrop&>(*rrc);
  const uint32_t h = 375, w = 500;
  for (uint64_t index = 0; index < 2000; ++index) {
    SampleRandom rng(SampleKey{1, 0, index}, 0);
    const CropWindow win = crop.Window(h, w, rng);
    ASSERT_GT(win.height, 0u);
    ASSERT_LE(win.top + win.height, h);
    ASSERT_LE(win.left + win.width, w);
    // Rounded sides: the area within scale and the aspect within ratio up to one pixel's rounding.
    const double area = double(win.height) * win.width / (double(h) * w);
    EXPECT_GE(area, 0.08 * 0.9) << index;
    EXPECT_LE(area, 1.0);
    const double aspect = double(win.width) / win.height;
    EXPECT_GE(aspect, 0.75 * (1 - 2.0 / win.height) - 1e-9) << index;
    EXPECT_LE(aspect, 4.0 / 3 * (1 + 2.0 / win.height) + 1e-9) << index;
  }
}

TEST(RandomResizedCropTest, ImpossibleRatioFallsBackToTheCentralCrop) {
  // A 10x1000 strip can fit no window of ratio in [0.75, 1.33] with area >= 0.5: torchvision's
  // fallback keeps the height and cuts the width to round(10 * 4/3) = 13, centred.
  const auto rrc = OneOp("RandomResizedCrop(8, scale=(0.5, 1))");
  const auto& crop = dynamic_cast<const RandomResizedCrop&>(*rrc);
  SampleRandom rng(SampleKey{}, 0);
  EXPECT_EQ(crop.Window(10, 1000, rng), (CropWindow{0, 493, 10, 13}));
}

TEST(RandomResizedCropTest, FullWindowIsAResizeOfTheWholeImage) {
  const std::vector<float> in = {0, 8, 16, 24};
  const auto rrc = OneOp("RandomResizedCrop((2, 4), scale=(1, 1), ratio=(1, 1))");
  const auto resize = OneOp("Resize((2, 4))");
  EXPECT_EQ(ApplyOp<float>(*rrc, Chw(ElementType::kF32, 1, 2, 2), in),
            ApplyOp<float>(*resize, Chw(ElementType::kF32, 1, 2, 2), in));
}

}  // namespace
}  // namespace sluice
