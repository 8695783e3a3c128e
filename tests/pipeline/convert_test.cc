#include "pipeline/convert.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/cpu_isa.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

uint16_t CompilerHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);  // GCC's IEEE binary16, round to nearest even
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

Normalization Scalar(float mean, float std) { return Normalization{{mean}, {std}}; }

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
  const Normalization norm{{0.2860f}, {0.3530f}};  // Fashion-MNIST's mean/std
  auto conv = SampleConverter::Create(SampleDType::kU8, GetParam(), norm, 256);
  ASSERT_TRUE(conv.ok());
  std::vector<uint8_t> in(512);
  for (int i = 0; i < 512; ++i) in[i] = static_cast<uint8_t>(i * 7);
  std::vector<char> out(512 * 4);
  conv->Convert(reinterpret_cast<const char*>(in.data()), out.data(), 2);
  for (int i = 0; i < 512; ++i) {
    const float ref = (static_cast<float>(in[i]) / 255.0f - norm.mean[0]) / norm.std[0];
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
  const Normalization norms[] = {Scalar(0.0f, 1.0f),       Scalar(0.2860f, 0.3530f),
                                 Scalar(0.1307f, 0.3081f), Scalar(0.5f, 0.5f),
                                 Scalar(-1.0f, 3.0f),      Scalar(0.25f, 0.0078125f)};
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
                  << conv->kernel_name() << " mean " << norm.mean[0] << " std " << norm.std[0]
                  << " value " << int{in[start + i]} << " n " << n << " i " << i;
            } else {
              uint16_t got;
              std::memcpy(&got, out.data() + 2 * i, 2);
              ASSERT_EQ(got, CompilerHalf(ref))
                  << conv->kernel_name() << " mean " << norm.mean[0] << " std " << norm.std[0]
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
  if (UsableCpuIsa() < CpuIsa::kAvx2) {
    GTEST_SKIP() << "this CPU has no AVX2 + FMA, or SLUICE_CPU_ISA=" << CpuIsaName(UsableCpuIsa())
                 << " caps it: the portable loop and the table are in use";
  }
  const Normalization norms[] = {Scalar(0.0f, 1.0f), Scalar(0.2860f, 0.3530f),
                                 Scalar(0.1307f, 0.3081f)};
  for (const Normalization& norm : norms) {
    auto f32 = SampleConverter::Create(SampleDType::kU8, H2DFormat::kF32, norm, 784);
    ASSERT_TRUE(f32.ok());
    EXPECT_EQ(f32->kernel_name(), "avx2+fma") << norm.mean[0] << " " << norm.std[0];
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0) {
      auto f16 = SampleConverter::Create(SampleDType::kU8, H2DFormat::kF16, norm, 784);
      ASSERT_TRUE(f16.ok());
      EXPECT_EQ(f16->kernel_name(), "avx2+fma+f16c") << norm.mean[0] << " " << norm.std[0];
    }
  }
  auto u8 = SampleConverter::Create(SampleDType::kU8, H2DFormat::kU8, {}, 784);
  EXPECT_EQ(u8->kernel_name(), "memcpy");
#else
  GTEST_SKIP() << "not an x86-64 build: the AVX2 kernel is not compiled";
#endif
}

TEST(Convert, F32SamplesAreNormalizedWithoutScaling) {
  auto conv = SampleConverter::Create(SampleDType::kF32, H2DFormat::kF32, Scalar(1, 2), 3);
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

// A stored HWC sample of C channels becomes C contiguous planes (CHW), each value normalized with
// its channel's mean and std, bit-identical to the scalar reference; for u8 output, the same
// bytes transposed. Planes of 35 and 323 values: vector body, scalar tail, and more than one
// gather run.
TEST(Convert, HwcSamplesBecomeChwPlanesNormalizedPerChannel) {
  const Normalization norm{{0.4914f, 0.4822f, 0.4465f, 0.5f}, {0.2470f, 0.2435f, 0.2616f, 0.5f}};
  for (uint32_t channels : {2u, 3u, 4u}) {
    Normalization n = norm;
    n.mean.resize(channels);
    n.std.resize(channels);
    for (auto [h, w] : {std::pair{5u, 7u}, std::pair{17u, 19u}}) {
      RecordSpec spec;
      spec.height = h;
      spec.width = w;
      spec.channels = channels;
      const size_t plane = size_t{h} * w, values = plane * channels;
      std::vector<uint8_t> in(2 * values);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 + channels);
      for (H2DFormat format : {H2DFormat::kU8, H2DFormat::kF16, H2DFormat::kF32}) {
        SCOPED_TRACE(::testing::Message()
                     << channels << "x" << h << "x" << w << " " << H2DFormatName(format));
        auto conv = SampleConverter::Create(spec, format, n);
        ASSERT_TRUE(conv.ok()) << conv.status();
        EXPECT_EQ(conv->out_spec(), (SampleSpec{format, channels, h, w, SampleLayout::kCHW}));
        std::vector<char> out(2 * values * 4);
        conv->Convert(reinterpret_cast<const char*>(in.data()), out.data(), 2);
        for (size_t s = 0; s < 2; ++s) {
          for (size_t c = 0; c < channels; ++c) {
            for (size_t p = 0; p < plane; ++p) {
              const uint8_t x = in[s * values + p * channels + c];  // HWC
              const size_t o = s * values + c * plane + p;          // CHW
              const float ref = NormalizeU8(x, n, c);
              if (format == H2DFormat::kU8) {
                ASSERT_EQ(static_cast<uint8_t>(out[o]), x) << s << " " << c << " " << p;
              } else if (format == H2DFormat::kF32) {
                float got;
                std::memcpy(&got, out.data() + 4 * o, 4);
                ASSERT_EQ(std::memcmp(&got, &ref, 4), 0) << s << " " << c << " " << p;
              } else {
                uint16_t got;
                std::memcpy(&got, out.data() + 2 * o, 2);
                ASSERT_EQ(got, CompilerHalf(ref)) << s << " " << c << " " << p;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Convert, F32HwcSamplesBecomeChwPlanesNormalizedPerChannel) {
  RecordSpec spec;
  spec.sample_dtype = SampleDType::kF32;
  spec.height = 1;
  spec.width = 2;
  spec.channels = 3;
  const float in[6] = {1, 2, 3, 4, 5, 6};  // pixel 0: 1 2 3, pixel 1: 4 5 6
  auto conv = SampleConverter::Create(spec, H2DFormat::kF32, Normalization{{1, 2, 3}, {1, 2, 4}});
  ASSERT_TRUE(conv.ok()) << conv.status();
  float out[6];
  conv->Convert(reinterpret_cast<const char*>(in), out, 1);
  const float want[6] = {0, 3, 0, 1.5f, 0, 0.75f};  // channel 0: 1 4, 1: 2 5, 2: 3 6
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

// torch's round_to_nearest_even (c10/util/BFloat16.h): the upper 16 bits, ties to even.
TEST(FloatToBFloat16, RoundsAsTorchDoes) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8: up to 1 + 2^-6.
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(std::nanf("")), 0x7fc0);
}

// The bulk conversion (AVX2 where the CPU has it, SLUICE_CPU_ISA=baseline: the scalar loop) is
// FloatToBFloat16 on every 89th bit pattern (normals, subnormals, ties, infinities, NaNs), at
// every position of its 16-wide body and in the tail, from an unaligned address.
TEST(F32ToBf16, IsFloatToBFloat16OnEveryValue) {
  constexpr size_t kChunk = 1000;
  std::vector<char> in(kChunk * 4 + 1);
  std::vector<uint16_t> out(kChunk);
  uint64_t bits = 0;
  while (bits < (uint64_t{1} << 32)) {
    std::vector<float> values;
    for (size_t i = 0; i < kChunk && bits < (uint64_t{1} << 32); ++i, bits += 89) {
      const uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      values.push_back(f);
    }
    std::memcpy(in.data() + 1, values.data(), values.size() * 4);
    F32ToBf16(in.data() + 1, out.data(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(out[i], FloatToBFloat16(values[i])) << std::hex << i << " " << values[i];
    }
  }
}

// A bf16 batch is the f32 batch rounded as tensor.to(torch.bfloat16) rounds: every u8 value,
// for the normalizations users pass, bit for bit.
TEST(Convert, Bf16IsTheF32ReferenceRoundedToNearestEven) {
  const Normalization norms[] = {Scalar(0.0f, 1.0f), Scalar(0.2860f, 0.3530f),
                                 Scalar(0.485f, 0.229f), Scalar(0.5f, 0.5f)};
  std::vector<uint8_t> in(256 + 13);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i);
  for (const Normalization& norm : norms) {
    auto conv = SampleConverter::Create(SampleDType::kU8, ElementType::kBF16, norm, in.size());
    ASSERT_TRUE(conv.ok()) << conv.status();
    // f32's proven kernel then the rounding (AVX2 CPUs), or the bf16 table: the same bits.
    EXPECT_TRUE(conv->kernel_name() == "avx2+fma+bf16" || conv->kernel_name() == "table")
        << conv->kernel_name();
    std::vector<uint16_t> out(in.size());
    conv->Convert(reinterpret_cast<const char*>(in.data()), out.data(), 1);
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(out[i], FloatToBFloat16(NormalizeU8(in[i], norm))) << norm.mean[0] << " " << i;
    }
  }
  auto f32 = SampleConverter::Create(SampleDType::kF32, ElementType::kBF16, Scalar(1, 2), 2);
  ASSERT_TRUE(f32.ok()) << f32.status();
  const float x[2] = {3.0f, 1.0f + 0x1p-7f};
  uint16_t y[2];
  f32->Convert(reinterpret_cast<const char*>(x), y, 1);
  EXPECT_EQ(y[0], 0x3f80);                    // (3 - 1) / 2
  EXPECT_EQ(y[1], FloatToBFloat16(0x1p-8f));  // (1 + 2^-7 - 1) / 2
}

// channels_last batches: each value stays in its pixel (HWC), and is bit for bit the value the
// CHW batch holds for that channel and pixel, in every format; 20 channels take the path that
// reads one channel at a time, 1 channel the whole-run path; 17x19 needs several gather runs.
TEST(Convert, HwcBatchesHoldTheChwBatchesValuesInTheirPixels) {
  for (uint32_t channels : {1u, 2u, 3u, 4u, 20u}) {
    Normalization n;
    n.mean.clear();
    n.std.clear();
    for (uint32_t c = 0; c < channels; ++c) {
      n.mean.push_back(0.4f + 0.01f * c);
      n.std.push_back(0.2f + 0.013f * c);
    }
    for (auto [h, w] : {std::pair{5u, 7u}, std::pair{17u, 19u}}) {
      RecordSpec spec;
      spec.height = h;
      spec.width = w;
      spec.channels = channels;
      const size_t plane = size_t{h} * w, values = plane * channels;
      std::vector<uint8_t> in(2 * values);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 + channels);
      for (ElementType format :
           {ElementType::kU8, ElementType::kF16, ElementType::kBF16, ElementType::kF32}) {
        SCOPED_TRACE(::testing::Message()
                     << channels << "x" << h << "x" << w << " " << ElementTypeName(format));
        auto chw = SampleConverter::Create(spec, format, n);
        auto hwc = SampleConverter::Create(spec, format, n, SampleLayout::kHWC);
        ASSERT_TRUE(chw.ok() && hwc.ok()) << hwc.status();
        EXPECT_EQ(hwc->out_spec(), (SampleSpec{format, channels, h, w, SampleLayout::kHWC}));
        const size_t size = ElementSize(format);
        std::vector<char> a(2 * values * size), b(2 * values * size);
        chw->Convert(reinterpret_cast<const char*>(in.data()), a.data(), 2);
        hwc->Convert(reinterpret_cast<const char*>(in.data()), b.data(), 2);
        for (size_t s = 0; s < 2; ++s) {
          for (size_t c = 0; c < channels; ++c) {
            for (size_t p = 0; p < plane; ++p) {
              const size_t at_chw = s * values + c * plane + p;
              const size_t at_hwc = s * values + p * channels + c;
              ASSERT_EQ(std::memcmp(a.data() + at_chw * size, b.data() + at_hwc * size, size), 0)
                  << s << " " << c << " " << p;
            }
          }
        }
        std::vector<char> t(values * size);  // ChwToHwc of the CHW sample is the HWC one
        ChwToHwc(a.data(), t.data(), channels, plane, size);
        EXPECT_EQ(std::memcmp(t.data(), b.data(), t.size()), 0);
        // The same sample given as u8 planes (a chain's output), converted in one pass.
        auto to_planes = SampleConverter::Create(spec, ElementType::kU8, n);
        ASSERT_TRUE(to_planes.ok());
        std::vector<char> planes(values);
        to_planes->Convert(reinterpret_cast<const char*>(in.data()), planes.data(), 1);
        std::vector<char> p(values * size);
        hwc->ConvertPlanar(planes.data(), p.data());
        EXPECT_EQ(std::memcmp(p.data(), b.data(), p.size()), 0);
        chw->ConvertPlanar(planes.data(), p.data());
        EXPECT_EQ(std::memcmp(p.data(), a.data(), p.size()), 0);
      }
    }
  }
}

TEST(Convert, F32SamplesKeepTheirPixelsInHwcBatches) {
  RecordSpec spec;
  spec.sample_dtype = SampleDType::kF32;
  spec.height = 1;
  spec.width = 2;
  spec.channels = 3;
  const float in[6] = {1, 2, 3, 4, 5, 6};  // pixel 0: 1 2 3, pixel 1: 4 5 6
  auto conv = SampleConverter::Create(spec, H2DFormat::kF32, Normalization{{1, 2, 3}, {1, 2, 4}},
                                      SampleLayout::kHWC);
  ASSERT_TRUE(conv.ok()) << conv.status();
  float out[6];
  conv->Convert(reinterpret_cast<const char*>(in), out, 1);
  const float want[6] = {0, 0, 0, 3, 1.5f, 0.75f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(Convert, NormalizationOfTheWrongLengthIsRefusedNamingTheChannelCount) {
  RecordSpec spec;
  spec.height = 4;
  spec.width = 4;
  spec.channels = 3;
  auto conv = SampleConverter::Create(spec, H2DFormat::kF32, Normalization{{0.1f, 0.2f}, {1}});
  ASSERT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(conv.status().message().find("mean has 2 values; the samples have 3 channels"),
            std::string::npos)
      << conv.status();
  conv = SampleConverter::Create(spec, H2DFormat::kF32, Normalization{{0.1f}, {1, 1, 0}});
  EXPECT_EQ(conv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SampleConverter::Create(spec, H2DFormat::kU8, Normalization{{0.1f}, {1, 2, 3}}).ok());
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
