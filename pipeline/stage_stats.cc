#include "pipeline/stage_stats.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/enum_names.h"
#include "pipeline/internal/stage_recorder.h"

namespace sluice {
int64_t ThreadCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double StageStats::items_per_second() const {
  const int64_t span = last_end_ns - first_start_ns;
  return span > 0 ? items * 1e9 / static_cast<double>(span) : 0.0;
}

std::string PipelineStats::ToString() const {
  std::string out;
  for (const StageStats& s : stages) {
    absl::StrAppendFormat(&out,
                          "stage %d x%d items=%d samples=%d bytes=%d busy=%.3fms wait_in=%.3fms "
                          "wait_out=%.3fms hw=%d\n",
                          static_cast<int>(s.stage), s.concurrency, s.items, s.samples, s.bytes,
                          s.busy_ns / 1e6, s.wait_input_ns / 1e6, s.wait_output_ns / 1e6,
                          s.queue_high_water);
  }
  absl::StrAppendFormat(&out,
                        "delivered %d batches / %d samples; skipped %d frames / %d records; "
                        "pool %d buffers, frame budget %d, ring %d\n",
                        batches_delivered, samples_delivered, skipped_frames, skipped_records,
                        pool_buffers, frame_budget, ring_depth);
  return out;
}

namespace {
std::atomic<bool> g_injected_delays_ended{false};
static_assert(std::atomic<bool>::is_always_lock_free, "EndInjectedDelays runs in a signal handler");
constexpr int64_t kDelayPollNs = 20'000'000;  // how often a sleeping delay checks for its end
}  // namespace

void EndInjectedDelays() { g_injected_delays_ended.store(true, std::memory_order_relaxed); }

void SpinFor(int64_t us) {
  if (us <= 0) return;
  const int64_t until = NowNs() + us * 1000;
  while (NowNs() < until && !g_injected_delays_ended.load(std::memory_order_relaxed)) {
  }
}

void SleepFor(int64_t us) {
  if (us <= 0) return;
  const int64_t until = NowNs() + us * 1000;
  for (int64_t now = NowNs(); now < until; now = NowNs()) {
    if (g_injected_delays_ended.load(std::memory_order_relaxed)) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min(until - now, kDelayPollNs)));
  }
}

namespace pipeline_internal {

uint32_t ThreadNumber() {
  static std::atomic<uint32_t> next{0};
  thread_local uint32_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

StageStats StageRecorder::Snapshot(bool measured_wait_input) const {
  StageStats s;
  s.stage = stage_;
  s.concurrency = concurrency_;
  s.items = items_.load(std::memory_order_relaxed);
  s.samples = samples_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.samples_outside_span = samples_outside_span_.load(std::memory_order_relaxed);
  s.busy_ns = busy_ns_.load(std::memory_order_relaxed);
  // The busy time at the sampled items' CPU share (CpuSample), at most the busy time.
  const int64_t sampled_wall = sampled_wall_ns_.load(std::memory_order_relaxed);
  if (sampled_wall > 0) {
    const double share =
        static_cast<double>(sampled_cpu_ns_.load(std::memory_order_relaxed)) / sampled_wall;
    s.cpu_ns = static_cast<int64_t>(std::min(1.0, share) * static_cast<double>(s.busy_ns));
  }
  s.wait_output_ns = wait_output_ns_.load(std::memory_order_relaxed);
  s.queue_high_water = static_cast<uint64_t>(high_water_.load(std::memory_order_relaxed));
  s.first_start_ns = first_start_ns_.load(std::memory_order_relaxed);
  s.last_end_ns = last_end_ns_.load(std::memory_order_relaxed);
  s.latency = latency_.Snapshot().Summary();
  if (measured_wait_input) {
    s.wait_input_ns = wait_input_ns_.load(std::memory_order_relaxed);
  } else if (s.items > 0) {
    const int64_t capacity = int64_t{concurrency_} * (s.last_end_ns - s.first_start_ns);
    s.wait_input_ns = std::max<int64_t>(0, capacity - s.busy_ns - s.wait_output_ns);
  }
  return s;
}

void SplitIdle(StageStats* s, int64_t blocked_ns) {
  if (s->items == 0) return;
  const int64_t capacity = int64_t{s->concurrency} * (s->last_end_ns - s->first_start_ns);
  const int64_t idle = std::max<int64_t>(0, capacity - s->busy_ns);
  s->wait_output_ns = std::clamp<int64_t>(int64_t{s->concurrency} * blocked_ns, 0, idle);
  s->wait_input_ns = idle - s->wait_output_ns;
}

}  // namespace pipeline_internal
}  // namespace sluice
