#include "pipeline/transforms/transform_chain.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/parse.h"
#include "tests/pipeline/transforms/transform_test_util.h"

namespace sluice {
namespace {
using ::sluice::testing::Chw;
using ::testing::HasSubstr;

constexpr char kCifarChain[] =
    "RandomCrop(32, padding=4, padding_mode=reflect), RandomHorizontalFlip(), "
    "Normalize(mean=[0.49, 0.48, 0.45], std=[0.25, 0.24, 0.26])";

TransformChain MakeChain(const std::string& text, const SampleSpec& in) {
  auto ops = ParseTransforms(text);
  EXPECT_TRUE(ops.ok()) << ops.status();
  auto chain = TransformChain::Create(std::move(*ops), in);
  EXPECT_TRUE(chain.ok()) << chain.status();
  return std::move(*chain);
}

std::vector<uint8_t> Image(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 % 251);
  return v;
}

std::vector<float> ApplyChain(const TransformChain& chain, const std::vector<uint8_t>& in,
                              uint64_t index) {
  std::vector<float> out(chain.output_spec().values());
  alignas(64) static thread_local char scratch[1 << 16];
  chain.Apply(in.data(), out.data(), SampleKey{5, 1, index}, scratch);
  return out;
}

TEST(TransformChain, OutputSpecAndScratchFollowTheOps) {
  const TransformChain chain = MakeChain(kCifarChain, Chw(ElementType::kU8, 3, 32, 32));
  EXPECT_EQ(chain.output_spec(), Chw(ElementType::kF32, 3, 32, 32));
  // Two u8 intermediates of 3072 bytes, each rounded to 64.
  EXPECT_EQ(chain.scratch_bytes(), 2u * 3072);
  EXPECT_EQ(MakeChain("CenterCrop(3)", Chw(ElementType::kU8, 1, 5, 5)).scratch_bytes(), 0u);
}

TEST(TransformChain, ApplyEqualsTheOpsOneAfterTheOtherWithStreamsByPosition) {
  const SampleSpec in = Chw(ElementType::kU8, 3, 32, 32);
  const TransformChain chain = MakeChain(kCifarChain, in);
  const auto src = Image(in.values());
  for (uint64_t index : {0u, 1u, 77u}) {
    const SampleKey key{5, 1, index};
    std::vector<uint8_t> a(in.values()), b(in.values());
    std::vector<float> expected(in.values());
    SampleRandom r0(key, 0), r1(key, 1), r2(key, 2);
    chain.op(0).Apply(chain.spec(0), src.data(), a.data(), r0);
    chain.op(1).Apply(chain.spec(1), a.data(), b.data(), r1);
    chain.op(2).Apply(chain.spec(2), b.data(), expected.data(), r2);
    EXPECT_EQ(ApplyChain(chain, src, index), expected);
  }
}

TEST(TransformChain, TheSameSamplesOnTwoThreadsInAnyOrder) {
  const SampleSpec in = Chw(ElementType::kU8, 3, 32, 32);
  const TransformChain chain = MakeChain(kCifarChain, in);
  const auto src = Image(in.values());
  std::vector<std::vector<float>> one(64), two(64);
  for (uint64_t i = 0; i < 64; ++i) one[i] = ApplyChain(chain, src, i);
  std::thread odd([&] {
    for (uint64_t i = 63; i < 64; i -= 2) two[i] = ApplyChain(chain, src, i);
  });
  for (uint64_t i = 0; i < 64; i += 2) two[i] = ApplyChain(chain, src, i);
  odd.join();
  EXPECT_EQ(one, two);
}

TEST(TransformChain, AnOpThatCannotTakeItsInputIsNamedWithItsPosition) {
  auto ops = ParseTransforms("RandomHorizontalFlip(), RandomCrop(40, padding=2), ToDtype(f32)");
  ASSERT_TRUE(ops.ok());
  auto chain = TransformChain::Create(std::move(*ops), Chw(ElementType::kU8, 3, 32, 32));
  ASSERT_FALSE(chain.ok());
  EXPECT_THAT(chain.status().message(),
              HasSubstr("transform 2 of 3, RandomCrop(size=(40, 40), padding=(2, 2, 2, 2)"));
  EXPECT_THAT(chain.status().message(), HasSubstr("on u8 3x32x32 CHW: RandomCrop: crop 40x40"));
}

TEST(TransformChain, AnOpSeesTheSpecTheOpsBeforeItOutput) {
  // Normalize takes f32 after the cast; without it, f16 is refused.
  EXPECT_TRUE(TransformChain::Create(*ParseTransforms("ToDtype(f32), Normalize(0, 1)"),
                                     Chw(ElementType::kF16, 1, 2, 2))
                  .ok());
  EXPECT_FALSE(TransformChain::Create(*ParseTransforms("ToDtype(f16), Normalize(0, 1)"),
                                      Chw(ElementType::kU8, 1, 2, 2))
                   .ok());
}

TEST(TransformChain, IdentityReadsBackToTheSameChain) {
  const TransformChain chain = MakeChain(kCifarChain, Chw(ElementType::kU8, 3, 32, 32));
  const TransformChain again = MakeChain(chain.Identity(), Chw(ElementType::kU8, 3, 32, 32));
  EXPECT_EQ(again.Identity(), chain.Identity());
  EXPECT_THAT(chain.Identity(), HasSubstr("), RandomHorizontalFlip(p=0.5), Normalize("));
}

TEST(TransformChain, AnEmptyChainCopiesTheSample) {
  const TransformChain chain = MakeChain("  ", Chw(ElementType::kU8, 1, 2, 2));
  const std::vector<uint8_t> in = {1, 2, 3, 4};
  std::vector<uint8_t> out(4);
  chain.Apply(in.data(), out.data(), SampleKey{}, nullptr);
  EXPECT_EQ(out, in);
  EXPECT_EQ(chain.Identity(), "");
}

TEST(TransformChain, TimingAddsOnlyForSampledIndices) {
  const SampleSpec in = Chw(ElementType::kU8, 3, 32, 32);
  const TransformChain chain = MakeChain(kCifarChain, in);
  const auto src = Image(in.values());
  std::vector<float> out(chain.output_spec().values());
  std::vector<char> scratch(chain.scratch_bytes() + 64);
  void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  int64_t ns[3] = {0, 0, 0};
  for (uint64_t i = 1; i < TransformChain::kTimingStride; ++i) {
    chain.Apply(src.data(), out.data(), SampleKey{1, 0, i}, aligned, ns);
  }
  EXPECT_EQ(ns[0] + ns[1] + ns[2], 0);
  for (uint64_t i = 0; i < 8 * TransformChain::kTimingStride; i += TransformChain::kTimingStride) {
    chain.Apply(src.data(), out.data(), SampleKey{1, 0, i}, aligned, ns);
  }
  for (int64_t t : ns) EXPECT_GT(t, 0);
}

}  // namespace
}  // namespace sluice
