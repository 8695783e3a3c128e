#include <set>

#include "gtest/gtest.h"
#include "pipeline/transforms/transform.h"

namespace sluice {
namespace {

TEST(SampleRandom, SameKeyAndStreamGiveTheSameNumbers) {
  SampleRandom a(SampleKey{7, 2, 1234}, 3), b(SampleKey{7, 2, 1234}, 3);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(SampleRandom, EachInputChangesTheStream) {
  const uint64_t base = SampleRandom(SampleKey{7, 2, 1234}, 3).Next();
  EXPECT_NE(SampleRandom(SampleKey{8, 2, 1234}, 3).Next(), base);
  EXPECT_NE(SampleRandom(SampleKey{7, 3, 1234}, 3).Next(), base);
  EXPECT_NE(SampleRandom(SampleKey{7, 2, 1235}, 3).Next(), base);
  EXPECT_NE(SampleRandom(SampleKey{7, 2, 1234}, 4).Next(), base);
  // Swapping index and stream does not give the same stream.
  EXPECT_NE(SampleRandom(SampleKey{0, 0, 1}, 0).Next(), SampleRandom(SampleKey{0, 0, 0}, 1).Next());
}

TEST(SampleRandom, UniformIntCoversItsInclusiveRangeAndNothingElse) {
  std::set<uint64_t> seen;
  for (uint64_t index = 0; index < 2000; ++index) {
    SampleRandom r(SampleKey{1, 0, index}, 0);
    const uint64_t v = r.UniformInt(5, 13);
    ASSERT_GE(v, 5u);
    ASSERT_LE(v, 13u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 9u);
  SampleRandom r(SampleKey{1, 0, 0}, 0);
  EXPECT_EQ(r.UniformInt(4, 4), 4u);
  r.UniformInt(0, UINT64_MAX);  // the full range does not loop forever
}

TEST(SampleRandom, UniformIntIsUnbiasedForARangeThatDoesNotDivide2To64) {
  // Three outcomes over 30000 draws: each within 5 sigma (~130) of 10000.
  int counts[3] = {0, 0, 0};
  for (uint64_t index = 0; index < 30000; ++index) {
    ++counts[SampleRandom(SampleKey{9, 1, index}, 2).UniformInt(0, 2)];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 650);
}

TEST(SampleRandom, UniformDoubleLiesInZeroToOne) {
  double lo = 1, hi = 0;
  for (uint64_t index = 0; index < 10000; ++index) {
    const double u = SampleRandom(SampleKey{3, 0, index}, 0).UniformDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_LT(lo, 0.01);
  EXPECT_GT(hi, 0.99);
}

}  // namespace
}  // namespace sluice
