// LatencyHistogram: buckets tile the durations, quantiles are exact to within 1/16 of their
// value, the max is exact, and merging or snapshotting loses no item.
#include "pipeline/latency_histogram.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(LatencyHistogram, BucketsTileTheDurations) {
  int prev = -1;
  int64_t prev_end = 0;
  for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
    // Each bucket starts where the one before it ends, and holds its own bounds.
    EXPECT_EQ(LatencyHistogram::BucketLow(b), prev_end) << b;
    prev_end = LatencyHistogram::BucketLow(b) + LatencyHistogram::BucketWidth(b);
    EXPECT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::BucketLow(b)), b);
    EXPECT_EQ(LatencyHistogram::BucketOf(prev_end - 1), b);
    // A bucket is at most 1/8 of its lowest value wide (beyond the first ones, 1 ns each).
    if (LatencyHistogram::BucketLow(b) >= 8) {
      EXPECT_LE(LatencyHistogram::BucketWidth(b) * 8, LatencyHistogram::BucketLow(b)) << b;
    }
    prev = b;
  }
  EXPECT_EQ(prev, LatencyHistogram::kBuckets - 1);
  EXPECT_EQ(LatencyHistogram::BucketOf(-5), 0);
  EXPECT_EQ(LatencyHistogram::BucketOf(INT64_MAX), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, QuantilesWithinASixteenth) {
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> dist(13.0, 1.5);  // ~0.4 ms median, a long tail
  std::vector<int64_t> v;
  LatencyHistogram h;
  for (int i = 0; i < 20000; ++i) {
    v.push_back(static_cast<int64_t>(dist(rng)));
    h.Add(v.back());
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99}) {
    const double exact = static_cast<double>(v[static_cast<size_t>(q * v.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(h.Quantile(q)), exact, exact / 16) << q;
  }
  EXPECT_EQ(h.max_ns(), v.back());
  EXPECT_EQ(h.Quantile(1.0), v.back());
  EXPECT_EQ(h.count(), v.size());
  const LatencySummary s = h.Summary();
  EXPECT_EQ(s.items, v.size());
  EXPECT_EQ(s.max_ns, v.back());
  EXPECT_EQ(s.p99_ns, h.Quantile(0.99));
}

TEST(LatencyHistogram, EmptyAndSingle) {
  LatencyHistogram h;
  EXPECT_EQ(h.Summary().items, 0u);
  EXPECT_EQ(h.Quantile(0.5), 0);
  h.Add(1'000'000);
  // One item: every quantile is that item (the bucket's midpoint is clamped to the max).
  EXPECT_EQ(h.Quantile(0.5), 1'000'000);
  EXPECT_EQ(h.Quantile(0.99), 1'000'000);
}

TEST(LatencyHistogram, MergeAndAtomicSnapshotLoseNothing) {
  LatencyHistogram a, b, all;
  AtomicLatencyHistogram atomic;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&atomic, t] {
      for (int i = 1; i <= 1000; ++i) atomic.Add(int64_t{i} * 1000 + t);
    });
  }
  for (int t = 0; t < 4; ++t) {
    for (int i = 1; i <= 1000; ++i) {
      (t % 2 == 0 ? a : b).Add(int64_t{i} * 1000 + t);
      all.Add(int64_t{i} * 1000 + t);
    }
  }
  for (std::thread& th : threads) th.join();
  a.Merge(b);
  const LatencyHistogram snap = atomic.Snapshot();
  for (const LatencyHistogram* h : {static_cast<const LatencyHistogram*>(&a), &snap}) {
    EXPECT_EQ(h->count(), all.count());
    EXPECT_EQ(h->max_ns(), all.max_ns());
    EXPECT_EQ(h->Quantile(0.5), all.Quantile(0.5));
    EXPECT_EQ(h->Quantile(0.99), all.Quantile(0.99));
  }
}

}  // namespace
}  // namespace sluice
