#include "pipeline/convert.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

uint16_t CompilerHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);  // GCC's IEEE binary16, round to nearest even
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

TEST(FloatToHalf, MatchesTheCompilersConversion) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE((FloatToHalf(std::nanf("")) & 0x7fff) > 0x7c00);
  // Every 97th float bit pattern (normals, subnormals, halfway cases, overflow).
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 97) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(FloatToHalf(f), CompilerHalf(f)) << std::hex << b;
  }
}

class ConvertFormats : public ::testing::TestWithParam<H2DFormat> {};

TEST_P(ConvertFormats, U8IsExactAgainstTheScalarReference) {
  const Normalization norm{0.2860f, 0.3530f};  // Fashion-MNIST's mean/std
  auto conv = SampleConverter::Create(SampleDType::kU8, GetParam(), norm, 256);
  ASSERT_TRUE(conv.ok());
  std::vector<uint8_t> in(512);
  for (int i = 0; i < 512; ++i) in[i] = static_cast<uint8_t>(i * 7);
  std::vector<char> out(512 * 4);
  conv->Convert(reinterpret_cast<const char*>(in.data()), out.data(), 2);
  for (int i = 0; i < 512; ++i) {
    const float ref = (static_cast<float>(in[i]) / 255.0f - norm.mean) / norm.std;
    if (GetParam() == H2DFormat::kU8) {
      ASSERT_EQ(static_cast<uint8_t>(out[i]), in[i]);
    } else if (GetParam() == H2DFormat::kF32) {
      float got;
      std::memcpy(&got, out.data() + 4 * i, 4);
      ASSERT_EQ(got, ref) << i;
    } else {
      uint16_t got;
      std::memcpy(&got, out.data() + 2 * i, 2);
      ASSERT_EQ(got, CompilerHalf(ref)) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ConvertFormats,
                         ::testing::Values(H2DFormat::kU8, H2DFormat::kF16, H2DFormat::kF32));

TEST(Convert, DefaultNormalizationIsToTensor) {
  auto conv = SampleConverter::Create(SampleDType::kU8, H2DFormat::kF32, Normalization{}, 1);
  ASSERT_TRUE(conv.ok());
  for (int v = 0; v < 256; ++v) {
    const uint8_t x = static_cast<uint8_t>(v);
    float y;
    conv->Convert(reinterpret_cast<const char*>(&x), &y, 1);
    EXPECT_EQ(y, static_cast<float>(v) / 255.0f);
  }
}

// Every input value, at every position of an 8-wide vector and in the scalar tail (lengths
// 1..41), for the normalizations users pass: bit-identical to the scalar reference, whichever
// kernel Create() picked.
TEST(Convert, EveryU8ValueAndLengthMatchesTheReference) {
  const Normalization norms[] = {{0.0f, 1.0f}, {0.2860f, 0.3530f}, {0.1307f, 0.3081f},
                                 {0.5f, 0.5f}, {-1.0f, 3.0f},      {0.25f, 0.0078125f}};
  for (H2DFormat format : {H2DFormat::kF32, H2DFormat::kF16}) {
    for (const Normalization& norm : norms) {
      for (size_t n = 1; n <= 41; ++n) {
        auto conv = SampleConverter::Create(SampleDType::kU8, format, norm, n);
        ASSERT_TRUE(conv.ok());
        std::vector<uint8_t> in(256 + n);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 + n);
        // Samples starting at every offset: each value lands in every vector lane and the tail.
        std::vector<char> out(n * 4);
        for (size_t start = 0; start < 256; start += 7) {
          conv->Convert(reinterpret_cast<const char*>(in.data() + start), out.data(), 1);
          for (size_t i = 0; i < n; ++i) {
            const float ref = NormalizeU8(in[start + i], norm);
            if (format == H2DFormat::kF32) {
              float got;
              std::memcpy(&got, out.data() + 4 * i, 4);
              ASSERT_EQ(std::memcmp(&got, &ref, 4), 0)
                  << conv->kernel_name() << " mean " << norm.mean << " std " << norm.std
                  << " value " << int{in[start + i]} << " n " << n << " i " << i;
            } else {
              uint16_t got;
              std::memcpy(&got, out.data() + 2 * i, 2);
              ASSERT_EQ(got, CompilerHalf(ref))
                  << conv->kernel_name() << " mean " << norm.mean << " std " << norm.std
                  << " value " << int{in[start + i]} << " n " << n << " i " << i;
            }
          }
        }
      }
    }
  }
}

// On a CPU with AVX2 + FMA the vector kernel is proven and used (a kernel that failed its
// proof would silently leave the slow path in place); elsewhere this says why it skips.
TEST(Convert, UsesTheVectorKernelWhereTheCpuHasIt) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "this CPU has no AVX2 + FMA: the portable loop and the table are in use";
  }
  const Normalization norms[] = {{0.0f, 1.0f}, {0.2860f, 0.3530f}, {0.1307f, 0.3081f}};
  for (const Normalization& norm : norms) {
    auto f32 = SampleConverter::Create(SampleDType::kU8, H2DFormat::kF32, norm, 784);
    ASSERT_TRUE(f32.ok());
    EXPECT_EQ(f32->kernel_name(), "avx2+fma") << norm.mean << " " << norm.std;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0) {
      auto f16 = SampleConverter::Create(SampleDType::kU8, H2DFormat::kF16, norm, 784);
      ASSERT_TRUE(f16.ok());
      EXPECT_EQ(f16->kernel_name(), "avx2+fma+f16c") << norm.mean << " " << norm.std;
    }
  }
  auto u8 = SampleConverter::Create(SampleDType::kU8, H2DFormat::kU8, {}, 784);
  EXPECT_EQ(u8->kernel_name(), "memcpy");
#else
  GTEST_SKIP() << "not an x86-64 build: the AVX2 kernel is not compiled";
#endif
}

TEST(Convert, F32SamplesAreNormalizedWithoutScaling) {
  auto conv = SampleConverter::Create(SampleDType::kF32, H2DFormat::kF32, Normalization{1, 2}, 3);
  ASSERT_TRUE(conv.ok());
  const float in[3] = {1.0f, 3.0f, -1.0f};
  float out[3];
  conv->Convert(reinterpret_cast<const char*>(in), out, 1);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -1.0f);
  EXPECT_EQ(SampleConverter::Create(SampleDType::kF32, H2DFormat::kU8, {}, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Convert, LabelsWidenToInt32) {
  const uint8_t u8[3] = {0, 9, 255};
  int32_t out[3];
  ConvertLabels(LabelDType::kU8, reinterpret_cast<const char*>(u8), out, 3);
  EXPECT_EQ(out[2], 255);
  const int32_t i32[2] = {-1, 123456};
  ConvertLabels(LabelDType::kI32, reinterpret_cast<const char*>(i32), out, 2);
  EXPECT_EQ(out[0], -1);
  EXPECT_EQ(out[1], 123456);
}

}  // namespace
}  // namespace sluice
