// StageRecorder: the hot-path side of StageStats. Relaxed atomics only; a snapshot is a
// consistent-enough view for reporting (each counter is exact, counters are not mutually
// synchronized).
#ifndef SLUICE_PIPELINE_INTERNAL_STAGE_RECORDER_H_
#define SLUICE_PIPELINE_INTERNAL_STAGE_RECORDER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pipeline/latency_histogram.h"
#include "pipeline/stage_stats.h"

namespace sluice::pipeline_internal {

inline void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
inline void AtomicMin0(std::atomic<int64_t>& a, int64_t v) {  // min, where 0 means unset
  int64_t cur = a.load(std::memory_order_relaxed);
  while ((cur == 0 || v < cur) && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Bounded trace buffer: spans past `capacity` are counted and dropped. One short critical
// section per span (spans are per frame or per batch, thousands per second, not per sample).
class TraceBuffer {
 public:
  explicit TraceBuffer(size_t capacity) {
    spans_.reserve(capacity);
    capacity_ = capacity;
  }
  void Add(const TraceSpan& s) {
    std::lock_guard<std::mutex> l(mu_);
    if (spans_.size() < capacity_) {
      spans_.push_back(s);
    } else {
      ++dropped_;
    }
  }
  std::vector<TraceSpan> Snapshot() const {
    std::lock_guard<std::mutex> l(mu_);
    return spans_;
  }
  uint64_t dropped() const {
    std::lock_guard<std::mutex> l(mu_);
    return dropped_;
  }

 private:
  mutable std::mutex mu_;
  size_t capacity_ = 0;
  std::vector<TraceSpan> spans_;
  uint64_t dropped_ = 0;
};

uint32_t ThreadNumber();

// The thread CPU clock read around 1 item in kCpuSampleStride of each stage on each thread: the
// read is a system call of about a microsecond, which around every batch of 32 would cost a few
// percent of the pipeline. StageStats::cpu_ns is the stage's busy time scaled by its sampled
// items' CPU time over their wall time.
inline constexpr uint32_t kCpuSampleStride = 8;
// ... after each thread's first kCpuSampleFirst items of a stage, all of which are read: a short
// run (a pass of 47 batches on 2 threads) sampled 1 in 8 has 6 sampled batches, and whether
// those few were preempted swung preprocess's CPU time by 25% (and the prediction by 35%).
inline constexpr uint32_t kCpuSampleFirst = 32;
class CpuSample {
 public:
  explicit CpuSample(Stage s) : start_(Sampled(s) ? ThreadCpuNs() : -1) {}
  // The item's thread CPU time; -1 when this item is not sampled.
  int64_t Elapsed() const { return start_ < 0 ? -1 : ThreadCpuNs() - start_; }

 private:
  static bool Sampled(Stage s) {
    thread_local std::array<uint32_t, kNumPipelineStages> seen{};
    const size_t i = static_cast<size_t>(s);
    if (i >= seen.size()) return true;
    const uint32_t n = seen[i]++;
    return n < kCpuSampleFirst || n % kCpuSampleStride == 0;
  }
  int64_t start_;
};

class StageRecorder {
 public:
  void Init(Stage s, int concurrency) {
    stage_ = s;
    concurrency_ = concurrency;
  }
  // `cpu_ns`: the thread CPU time the item took, when it was sampled (CpuSample); -1 otherwise.
  void AddItem(int64_t start_ns, int64_t end_ns, uint64_t samples, uint64_t bytes,
               int64_t cpu_ns = -1) {
    items_.fetch_add(1, std::memory_order_relaxed);
    if (cpu_ns >= 0) {
      sampled_cpu_ns_.fetch_add(cpu_ns, std::memory_order_relaxed);
      sampled_wall_ns_.fetch_add(end_ns - start_ns, std::memory_order_relaxed);
    }
    samples_.fetch_add(samples, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    busy_ns_.fetch_add(end_ns - start_ns, std::memory_order_relaxed);
    latency_.Add(end_ns - start_ns);
    AtomicMin0(first_start_ns_, start_ns);
    AtomicMax(last_end_ns_, end_ns);
  }
  // The samples of an item that ended while the consumer was outside its span
  // (Pipeline::SetConsumerInSpan).
  void AddOutsideSpan(uint64_t samples) {
    samples_outside_span_.fetch_add(samples, std::memory_order_relaxed);
  }
  void AddWaitInput(int64_t ns) { wait_input_ns_.fetch_add(ns, std::memory_order_relaxed); }
  void AddWaitOutput(int64_t ns) { wait_output_ns_.fetch_add(ns, std::memory_order_relaxed); }
  void NoteQueue(int64_t depth) { AtomicMax(high_water_, depth); }
  // `measured_wait_input`: true when wait_input is recorded directly (not derived).
  StageStats Snapshot(bool measured_wait_input) const;

 private:
  Stage stage_ = Stage::kRead;
  int concurrency_ = 1;
  std::atomic<uint64_t> items_{0}, samples_{0}, bytes_{0}, samples_outside_span_{0};
  std::atomic<int64_t> busy_ns_{0}, wait_input_ns_{0}, wait_output_ns_{0};
  std::atomic<int64_t> sampled_cpu_ns_{0}, sampled_wall_ns_{0};
  std::atomic<int64_t> high_water_{0}, first_start_ns_{0}, last_end_ns_{0};
  AtomicLatencyHistogram latency_;
};

// Whether a stage's wait_input is recorded directly rather than derived from its busy time:
// delivery measures the consumer's wait in Next(); read has no input, and pinned_wait and decode
// (a part of preprocess's work) are not graph nodes, so deriving an idle time for them would be
// meaningless (they report 0).
inline bool WaitInputIsMeasured(Stage s) {
  return s == Stage::kRead || s == Stage::kDecode || s == Stage::kPinnedWait ||
         s == Stage::kDelivery;
}

// Splits a graph stage's idle time, concurrency x its window - busy, into the two waits:
// `blocked_ns` is wall time during which its output could not go on (the pool or the ring
// held it back: every one of its threads idles then, so up to concurrency x that), the rest
// is waiting for input. For a stage whose wait_input is derived.
void SplitIdle(StageStats* s, int64_t blocked_ns);

// One recorder per stage, indexed by Stage.
class StageRecorders {
 public:
  StageRecorder& operator[](Stage s) { return recorders_[static_cast<size_t>(s)]; }
  const StageRecorder& operator[](Stage s) const { return recorders_[static_cast<size_t>(s)]; }
  StageStats Snapshot(Stage s) const { return (*this)[s].Snapshot(WaitInputIsMeasured(s)); }

 private:
  std::array<StageRecorder, kNumPipelineStages> recorders_;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_STAGE_RECORDER_H_
