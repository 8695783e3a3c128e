#include "pipeline/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sluice {

// Durations below kSubBuckets ns have a bucket each; above, a doubling [2^e, 2^(e+1)) is split
// into kSubBuckets buckets of width 2^(e-3), numbered on from there.
int LatencyHistogram::BucketOf(int64_t ns) {
  if (ns < kSubBuckets) return static_cast<int>(std::max<int64_t>(ns, 0));
  const int e = 63 - std::countl_zero(static_cast<uint64_t>(ns));  // 2^e <= ns, e >= 3
  const int b = (e - 2) * kSubBuckets + static_cast<int>((ns >> (e - 3)) & (kSubBuckets - 1));
  return std::min(b, kBuckets - 1);
}

int64_t LatencyHistogram::BucketLow(int b) {
  if (b < kSubBuckets) return b;
  const int e = b / kSubBuckets + 2;
  return static_cast<int64_t>(kSubBuckets + b % kSubBuckets) << (e - 3);
}

int64_t LatencyHistogram::BucketWidth(int b) {
  return b < kSubBuckets ? 1 : int64_t{1} << (b / kSubBuckets - 1);
}

void LatencyHistogram::Add(int64_t ns) {
  ++counts_[static_cast<size_t>(BucketOf(ns))];
  ++count_;
  max_ns_ = std::max(max_ns_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  AddCounts(other.counts_, other.max_ns_);
}

void LatencyHistogram::AddCounts(const std::array<uint64_t, kBuckets>& counts, int64_t max_ns) {
  for (size_t i = 0; i < counts.size(); ++i) {
    counts_[i] += counts[i];
    count_ += counts[i];
  }
  max_ns_ = std::max(max_ns_, max_ns);
}

int64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[static_cast<size_t>(b)];
    if (seen >= rank) return std::min(max_ns_, BucketLow(b) + BucketWidth(b) / 2);
  }
  return max_ns_;
}

LatencySummary LatencyHistogram::Summary() const {
  return {count_, Quantile(0.5), Quantile(0.99), max_ns_};
}

LatencyHistogram AtomicLatencyHistogram::Snapshot() const {
  std::array<uint64_t, LatencyHistogram::kBuckets> counts{};
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = counts_[i].load(std::memory_order_relaxed);
  LatencyHistogram h;
  h.AddCounts(counts, max_ns_.load(std::memory_order_relaxed));
  return h;
}

}  // namespace sluice
