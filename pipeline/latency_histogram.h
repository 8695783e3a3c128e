// Item latency: how long each item of a stage took (a frame, an image, a batch, a step), as a
// log-scale histogram, and its p50, p99 and max. A stage's mean hides its tail: a few slow
// items (a large image, a read that missed the page cache, a copy behind another) stall a
// batch while the mean looks fine (docs/bottleneck.md, "Item latency").
//
// Buckets: 8 per doubling of the duration, so a quantile is exact to within 1/16 of its value
// (the bucket's midpoint is returned, clamped to the largest value seen); 1 ns to 2^42 ns (73
// minutes), longer items in the last bucket. The max is exact.
//
// Thread safety: LatencyHistogram is a plain value (one thread, or merged from snapshots);
// AtomicLatencyHistogram is the hot path's, relaxed atomics only (each bucket exact, buckets
// not mutually synchronized: a snapshot taken while items are added is a consistent-enough
// view for reporting).
#ifndef SLUICE_PIPELINE_LATENCY_HISTOGRAM_H_
#define SLUICE_PIPELINE_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace sluice {

// A stage's item latency; all 0 when it recorded no items.
struct LatencySummary {
  uint64_t items = 0;
  int64_t p50_ns = 0;
  int64_t p99_ns = 0;
  int64_t max_ns = 0;
};

class LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 8;  // per doubling
  static constexpr int kBuckets = 320;   // 1 ns .. 2^42 ns

  // The bucket of a duration (negative durations count as 0).
  static int BucketOf(int64_t ns);
  // The smallest duration in bucket `b`, and the bucket's width.
  static int64_t BucketLow(int b);
  static int64_t BucketWidth(int b);

  void Add(int64_t ns);
  void Merge(const LatencyHistogram& other);
  // `counts`: kBuckets bucket counts (AtomicLatencyHistogram's snapshot).
  void AddCounts(const std::array<uint64_t, kBuckets>& counts, int64_t max_ns);

  uint64_t count() const { return count_; }
  int64_t max_ns() const { return max_ns_; }
  // The q-quantile (q in [0, 1]): the midpoint of the bucket that holds the ceil(q x count)-th
  // smallest item, at most max_ns(); 0 when empty.
  int64_t Quantile(double q) const;
  LatencySummary Summary() const;

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  int64_t max_ns_ = 0;
};

class AtomicLatencyHistogram {
 public:
  void Add(int64_t ns) {
    counts_[static_cast<size_t>(LatencyHistogram::BucketOf(ns))].fetch_add(
        1, std::memory_order_relaxed);
    int64_t cur = max_ns_.load(std::memory_order_relaxed);
    while (ns > cur && !max_ns_.compare_exchange_weak(cur, ns, std::memory_order_relaxed)) {
    }
  }
  LatencyHistogram Snapshot() const;

 private:
  std::array<std::atomic<uint64_t>, LatencyHistogram::kBuckets> counts_{};
  std::atomic<int64_t> max_ns_{0};
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_LATENCY_HISTOGRAM_H_
