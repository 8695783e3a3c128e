#include "engine/job/autotune.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "report/advice/advice.h"
#include "report/stages.h"

namespace sluice {
namespace {

constexpr double kKeepsUpWaitPct = 5.0;
constexpr double kHeadroom = 1.2;
constexpr uint32_t kMaxReadAhead = 64;

std::optional<double> Capacity(const StageStats& s) {
  if (s.items == 0 || s.busy_ns <= 0) return std::nullopt;
  return s.samples * 1e9 * std::max(1, s.concurrency) / s.busy_ns;
}

// Compute's wait for input, in % of the epoch after start-up. The wait for the very first
// batch (pipeline start-up) happens once per run; tuning cannot remove it, so it is left out.
double SteadyWaitPct(const PipelineStats& stats, double train_seconds) {
  const StageStats& delivery = stats[Stage::kDelivery];
  const double startup_s = delivery.first_start_ns > stats.start_ns
                               ? (delivery.first_start_ns - stats.start_ns) / 1e9
                               : 0;
  const double steady_s = train_seconds - startup_s;
  const double wait_s = std::max(0.0, delivery.wait_input_ns / 1e9 - startup_s);
  return steady_s > 0 ? 100.0 * wait_s / steady_s : 0;
}

// The slowest CPU stage of the pipeline and its capacity, if any stage did work.
std::optional<std::pair<Stage, double>> SlowestStage(const PipelineStats& stats) {
  std::optional<std::pair<Stage, double>> slow;
  for (Stage s : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    std::optional<double> cap = Capacity(stats[s]);
    if (cap && (!slow || *cap < slow->second)) slow = std::make_pair(s, *cap);
  }
  return slow;
}

// The slowest stage cannot keep up with compute: more read-ahead (read is serial) or twice
// its concurrency, within the CPU budget.
void TuneSlowStage(Stage slow, double slow_cap, double compute_cap, const PipelineStats& stats,
                   const AutotuneBudget& budget, const PipelineResources& current,
                   AutotuneDecision* d) {
  if (slow == Stage::kRead) {
    const uint32_t ahead = std::min(kMaxReadAhead, std::max(1u, current.read_ahead_frames) * 2);
    if (ahead != current.read_ahead_frames) {
      d->resources.read_ahead_frames = ahead;
      d->changed = true;
      d->reasons.push_back(absl::StrFormat(
          "read-ahead %d -> %d frames: read is the slowest stage (%.0f samples/s vs compute "
          "%.0f) and is serial; more frames in flight absorb its latency",
          current.read_ahead_frames, ahead, slow_cap, compute_cap));
    }
    return;
  }
  int& conc = slow == Stage::kDecompress ? d->resources.decompress_threads
                                         : d->resources.preprocess_threads;
  const int now = std::max(1, stats[slow].concurrency);
  const int want = std::min(budget.cpu_threads, now * 2);
  if (want > now) {
    conc = want;
    d->resources.threads = std::max(d->resources.threads, want);
    d->changed = true;
    d->reasons.push_back(absl::StrFormat(
        "%s concurrency %d -> %d: it is the slowest stage (%.0f samples/s vs compute %.0f)",
        StageName(slow), now, want, slow_cap, compute_cap));
  } else {
    d->reasons.push_back(absl::StrFormat(
        "%s is the slowest stage (%.0f samples/s vs compute %.0f) and already has the whole "
        "CPU budget (%d threads): make it cheaper instead (see the report)",
        StageName(slow), slow_cap, compute_cap, budget.cpu_threads));
  }
}

// Every stage keeps up, yet compute waited: hand-off stalls; more buffers in flight hide them.
void GrowPool(const PipelineStats& stats, const AutotuneBudget& budget, uint64_t batch_bytes,
              double wait_pct, double slow_cap, double compute_cap, AutotuneDecision* d) {
  const uint64_t max_pool = batch_bytes > 0 ? budget.memory_bytes / batch_bytes : 0;
  const uint32_t pool =
      static_cast<uint32_t>(std::min<uint64_t>(max_pool, uint64_t{stats.pool_buffers} * 2));
  if (pool > stats.pool_buffers) {
    d->resources.pool_size = pool;
    d->changed = true;
    d->reasons.push_back(absl::StrFormat(
        "pinned pool %d -> %d buffers (%.1f MiB): compute waited %.1f%% although every stage "
        "keeps up (slowest %.0f samples/s vs compute %.0f); more batches in flight hide the "
        "hand-offs",
        stats.pool_buffers, pool, pool * double(batch_bytes) / (1 << 20), wait_pct, slow_cap,
        compute_cap));
  } else {
    d->reasons.push_back(absl::StrFormat(
        "kept the pool at %d buffers: doubling it would pass the memory budget of %.0f MiB",
        stats.pool_buffers, budget.memory_bytes / double(1 << 20)));
  }
}

// The copies waited for ring slots: more slots let more copies run ahead behind compute.
void GrowRing(const PipelineStats& stats, const AutotuneBudget& budget, uint64_t batch_bytes,
              double wait_pct, AutotuneDecision* d) {
  const uint64_t max_ring = batch_bytes > 0 ? budget.device_memory_bytes / batch_bytes : 0;
  const uint32_t ring = static_cast<uint32_t>(std::min<uint64_t>(
      {max_ring, kMaxDeviceRingDepth, uint64_t{std::max(1u, stats.ring_depth)} * 2}));
  const StageStats& h2d = stats[Stage::kH2D];
  if (ring > stats.ring_depth) {
    d->resources.device_ring_depth = ring;
    d->changed = true;
    d->reasons.push_back(absl::StrFormat(
        "device ring %d -> %d slots (%.1f MiB of device memory): compute waited %.1f%% and the "
        "copies waited %.1f ms for a free slot, more than the %.1f ms they copied",
        stats.ring_depth, ring, ring * double(batch_bytes) / (1 << 20), wait_pct,
        h2d.wait_output_ns / 1e6, h2d.busy_ns / 1e6));
  } else {
    d->reasons.push_back(absl::StrFormat(
        "kept the device ring at %d slots: the copies waited for a slot, but doubling it would "
        "pass %d slots or the device memory budget of %.0f MiB",
        stats.ring_depth, kMaxDeviceRingDepth, budget.device_memory_bytes / double(1 << 20)));
  }
}

}  // namespace

AutotuneDecision Autotune(const PipelineResources& current, const PipelineStats& stats,
                          const ComputeStats& compute, double train_seconds,
                          const AutotuneBudget& budget, uint64_t batch_bytes) {
  AutotuneDecision d;
  d.resources = current;
  d.resources.pool_size = stats.pool_buffers;
  const double wait_pct = SteadyWaitPct(stats, train_seconds);
  const double compute_cap =
      compute.busy_ns > 0 ? compute.samples * 1e9 / static_cast<double>(compute.busy_ns) : 0;
  if (wait_pct < kKeepsUpWaitPct || compute_cap <= 0) {
    d.reasons.push_back(absl::StrFormat(
        "kept the settings: compute waited %.1f%% of the first epoch after start-up (< %.0f%%): "
        "the pipeline keeps up",
        wait_pct, kKeepsUpWaitPct));
    return d;
  }
  const std::optional<std::pair<Stage, double>> slow = SlowestStage(stats);
  const double slow_cap = slow ? slow->second : 0;
  if (slow && slow_cap < kHeadroom * compute_cap) {
    TuneSlowStage(slow->first, slow_cap, compute_cap, stats, budget, current, &d);
  } else if (stats.ring_depth > 0 && CopiesWaitedForSlots(stats[Stage::kH2D])) {
    GrowRing(stats, budget, batch_bytes, wait_pct, &d);
  } else {
    GrowPool(stats, budget, batch_bytes, wait_pct, slow_cap, compute_cap, &d);
  }
  return d;
}

}  // namespace sluice
