#include "pipeline/internal/order_planner.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice::pipeline_internal {
namespace {

// SplitMix64: tiny, fast and fully specified, so the order is the same on every platform and
// standard library (std::uniform_int_distribution is implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias (Lemire's multiply-shift with rejection).
  uint64_t Below(uint64_t n) {
    __extension__ typedef unsigned __int128 u128;  // GCC/Clang extension; -Wpedantic-clean
    u128 m = static_cast<u128>(Next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<u128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

uint64_t Mix(uint64_t a, uint64_t b, uint64_t c) {
  Rng r(a ^ 0x5a17c0ffee5eedULL);
  uint64_t x = r.Next() ^ b;
  Rng r2(x);
  uint64_t y = r2.Next() ^ c;
  return Rng(y).Next();
}

template <typename T>
void Shuffle(std::vector<T>& v, size_t begin, size_t end, Rng& rng) {
  for (size_t i = end - begin; i > 1; --i) {
    size_t j = rng.Below(i);
    std::swap(v[begin + i - 1], v[begin + j]);
  }
}

uint32_t EffectiveWindow(const SplitLayout& layout, const OrderOptions& o) {
  const uint32_t f = static_cast<uint32_t>(layout.frames.size());
  if (!o.shuffle) return 1;
  return (o.window_frames == 0 || o.window_frames > f) ? f : o.window_frames;
}

}  // namespace

uint64_t StepsPerEpoch(uint64_t records, const OrderOptions& o) {
  if (o.batch_size == 0) return 0;
  return o.drop_last ? records / o.batch_size : (records + o.batch_size - 1) / o.batch_size;
}

namespace {

// The epoch's whole sequence of samples, as (frame << 32 | global record id) so the frame
// travels along. Level 1 permutes the frames; level 2 permutes the records within each window
// of W frames.
std::vector<uint64_t> EpochSequence(const SplitLayout& layout, const OrderOptions& o,
                                    uint64_t epoch, std::vector<uint32_t>* frame_order) {
  const uint32_t f = static_cast<uint32_t>(layout.frames.size());
  frame_order->resize(f);
  for (uint32_t i = 0; i < f; ++i) (*frame_order)[i] = i;
  if (o.shuffle) {
    Rng rng(Mix(o.seed, epoch, ~uint64_t{0}));
    Shuffle(*frame_order, 0, f, rng);
  }
  const uint32_t w = EffectiveWindow(layout, o);
  std::vector<uint64_t> seq;
  seq.reserve(layout.record_count);
  for (uint32_t win = 0, start = 0; start < f; ++win, start += w) {
    const size_t begin = seq.size();
    const uint32_t stop = std::min(f, start + w);
    for (uint32_t k = start; k < stop; ++k) {
      const uint32_t frame = (*frame_order)[k];
      const FrameRef& fr = layout.frames[frame];
      for (uint32_t r = 0; r < fr.record_count; ++r) {
        seq.push_back(uint64_t{frame} << 32 | (fr.first_record + r));
      }
    }
    if (o.shuffle) {
      Rng rng(Mix(o.seed, epoch, win));
      Shuffle(seq, begin, seq.size(), rng);
    }
  }
  return seq;
}

// This rank's positions of the sequence, local batch by local batch, for global steps
// [first_step, steps): positions [g*B, min((g+1)*B, end)) form global batch g. With one rank
// the local batch is the global batch. Otherwise the batch's positions are sorted by their
// frame's key, then position, cut into world_size chunks whose sizes differ by at most one (the
// first count % world_size ranks get one more), and chunk `rank` is kept, in sequence order.
// A frame's key is (its place within its shuffle window, its window): every window's k-th frame
// goes to the same rank, so a batch that spans two windows splits both the same way instead of
// giving all of the earlier window's frames to the low ranks. Fills batch_offsets and
// batch_global_size.
std::vector<uint32_t> SliceBatches(const std::vector<uint32_t>& frame_order, uint32_t window,
                                   const std::vector<uint64_t>& seq, uint64_t first_step,
                                   uint64_t steps, uint64_t end, EpochPlan* plan) {
  const uint64_t b = plan->batch_size;
  const uint32_t world = plan->world_size;
  const uint32_t f = static_cast<uint32_t>(frame_order.size());
  const uint32_t windows = (f + window - 1) / window;
  std::vector<uint32_t> frame_key(f);
  for (uint32_t k = 0; k < f; ++k) frame_key[frame_order[k]] = (k % window) * windows + k / window;
  std::vector<uint32_t> positions;
  positions.reserve(world == 1 ? end - std::min(end, first_step * b)
                               : (end - std::min(end, first_step * b)) / world + steps);
  std::vector<uint64_t> keyed;  // (frame key << 32 | sequence position) of one batch
  plan->batch_offsets.assign(1, 0);
  for (uint64_t g = first_step; g < steps; ++g) {
    const uint64_t p0 = g * b;
    const uint64_t p1 = std::min(end, p0 + b);
    const uint32_t count = static_cast<uint32_t>(p1 - p0);
    plan->batch_global_size.push_back(count);
    if (world == 1) {
      for (uint64_t p = p0; p < p1; ++p) positions.push_back(static_cast<uint32_t>(p));
    } else {
      keyed.clear();
      for (uint64_t p = p0; p < p1; ++p)
        keyed.push_back(uint64_t{frame_key[seq[p] >> 32]} << 32 | p);
      std::sort(keyed.begin(), keyed.end());  // positions are distinct: a stable order
      const uint32_t base = count / world, extra = count % world;
      const uint32_t begin = plan->rank * base + std::min(plan->rank, extra);
      const uint32_t size = base + (plan->rank < extra ? 1 : 0);
      const size_t first = positions.size();
      for (uint32_t i = begin; i < begin + size; ++i)
        positions.push_back(static_cast<uint32_t>(keyed[i]));
      std::sort(positions.begin() + first, positions.end());
    }
    plan->batch_offsets.push_back(static_cast<uint32_t>(positions.size()));
  }
  return positions;
}

// The frames to read, in read order (the frame order filtered to frames holding a sample at
// one of `positions`: a resumed epoch skips the frames of its skipped steps, a rank the frames
// of other ranks' samples), and each sample's record, slot and offset.
void PlaceSamples(const SplitLayout& layout, const std::vector<uint32_t>& frame_order,
                  const std::vector<uint64_t>& seq, const std::vector<uint32_t>& positions,
                  EpochPlan* plan) {
  const uint32_t f = static_cast<uint32_t>(layout.frames.size());
  std::vector<uint32_t> slot_of(f, UINT32_MAX);
  std::vector<char> needed(f, 0);
  for (uint32_t p : positions) needed[seq[p] >> 32] = 1;
  for (uint32_t k = 0; k < f; ++k) {
    if (needed[frame_order[k]]) {
      slot_of[frame_order[k]] = static_cast<uint32_t>(plan->read_frames.size());
      plan->read_frames.push_back(frame_order[k]);
    }
  }
  const size_t count = positions.size();
  plan->order.resize(count);
  plan->sample_slot.resize(count);
  plan->sample_offset.resize(count);
  plan->sample_position = positions;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t v = seq[positions[i]];
    const uint32_t frame = static_cast<uint32_t>(v >> 32);
    const uint32_t rec = static_cast<uint32_t>(v);
    plan->order[i] = rec;
    plan->sample_slot[i] = slot_of[frame];
    plan->sample_offset[i] = rec - static_cast<uint32_t>(layout.frames[frame].first_record);
  }
}

// batch -> distinct slots, and slot -> batches (CSR). Returns each slot's last batch.
std::vector<uint32_t> LinkBatchesAndSlots(EpochPlan* plan) {
  const uint32_t batches = plan->num_batches();
  const uint32_t slots = static_cast<uint32_t>(plan->read_frames.size());
  std::vector<uint32_t> last_batch_seen(slots, UINT32_MAX);
  std::vector<uint32_t> slot_refs(slots, 0);
  plan->batch_slot_begin.assign(1, 0);
  for (uint32_t b = 0; b < batches; ++b) {
    for (uint32_t i = plan->batch_begin(b); i < plan->batch_end(b); ++i) {
      const uint32_t s = plan->sample_slot[i];
      if (last_batch_seen[s] != b) {
        last_batch_seen[s] = b;
        plan->batch_slots.push_back(s);
        ++slot_refs[s];
      }
    }
    plan->batch_slot_begin.push_back(static_cast<uint32_t>(plan->batch_slots.size()));
  }
  plan->slot_batch_begin.assign(slots + 1, 0);
  for (uint32_t s = 0; s < slots; ++s) {
    plan->slot_batch_begin[s + 1] = plan->slot_batch_begin[s] + slot_refs[s];
  }
  plan->slot_batches.resize(plan->batch_slots.size());
  std::vector<uint32_t> fill(plan->slot_batch_begin.begin(), plan->slot_batch_begin.end() - 1);
  for (uint32_t b = 0; b < batches; ++b) {
    for (uint32_t j = plan->batch_slot_begin[b]; j < plan->batch_slot_begin[b + 1]; ++j) {
      plan->slot_batches[fill[plan->batch_slots[j]]++] = b;
    }
  }
  return last_batch_seen;
}

// Deadlock-free frame budget: when b is the earliest unassembled batch, every slot up to
// R(b) = max slot used by batches <= b must be resident, minus slots whose last batch is < b.
uint32_t MinFramesAlive(const EpochPlan& plan, const std::vector<uint32_t>& last_batch) {
  const uint32_t batches = plan.num_batches();
  std::vector<uint32_t> freed_at(batches + 1, 0);  // slots whose last batch is b
  for (uint32_t last : last_batch) {
    if (last != UINT32_MAX) ++freed_at[last];
  }
  uint32_t reach = 0, freed = 0, need = 0;
  for (uint32_t b = 0; b < batches; ++b) {
    for (uint32_t j = plan.batch_slot_begin[b]; j < plan.batch_slot_begin[b + 1]; ++j) {
      reach = std::max(reach, plan.batch_slots[j] + 1);
    }
    need = std::max(need, reach - freed);
    freed += freed_at[b];
  }
  return need;
}

}  // namespace

absl::StatusOr<EpochPlan> PlanEpoch(const SplitLayout& layout, const OrderOptions& o,
                                    uint64_t epoch, uint64_t first_step) {
  const uint64_t n = layout.record_count;
  if (o.batch_size == 0) return absl::InvalidArgumentError("batch_size must be >= 1");
  if (o.world_size == 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " is not below the world size ", o.world_size));
  }
  if (n == 0 || layout.frames.empty()) {
    return absl::InvalidArgumentError("the split has no records");
  }
  if (n > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError("splits of more than 2^32 records are not supported");
  }
  const uint64_t steps = StepsPerEpoch(n, o);
  if (first_step > steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start step ", first_step, " is past the end of the epoch (", steps, " steps)"));
  }
  std::vector<uint32_t> frame_order;
  const std::vector<uint64_t> seq = EpochSequence(layout, o, epoch, &frame_order);
  if (seq.size() != n) return absl::InvalidArgumentError("frame record counts disagree with split");

  EpochPlan plan;
  plan.epoch = epoch;
  plan.first_step = first_step;
  plan.batch_size = o.batch_size;
  plan.rank = o.rank;
  plan.world_size = o.world_size;
  const std::vector<uint32_t> positions =
      SliceBatches(frame_order, EffectiveWindow(layout, o), seq, first_step, steps,
                   std::min<uint64_t>(n, steps * o.batch_size), &plan);
  PlaceSamples(layout, frame_order, seq, positions, &plan);
  const std::vector<uint32_t> last_batch = LinkBatchesAndSlots(&plan);
  plan.min_frames_alive = MinFramesAlive(plan, last_batch);
  return plan;
}

uint32_t FramesAliveBound(const SplitLayout& layout, const OrderOptions& o) {
  const uint32_t f = static_cast<uint32_t>(layout.frames.size());
  if (f == 0) return 0;
  const uint32_t w = EffectiveWindow(layout, o);
  std::vector<uint32_t> sizes;
  sizes.reserve(f);
  for (const FrameRef& fr : layout.frames) sizes.push_back(fr.record_count);
  std::nth_element(sizes.begin(), sizes.begin() + (w - 1), sizes.end());
  uint64_t r_min = 0;
  for (uint32_t i = 0; i < w; ++i) r_min += std::min(sizes[i], sizes[w - 1]);
  r_min = std::max<uint64_t>(r_min, 1);
  // The earliest unassembled batch spans at most ceil((B-1)/r_min) + 2 windows; only frames of
  // those windows can be resident while it waits (docs/architecture.md, "Memory bounds"). A
  // rank's local batch is a subset of the global batch's positions, so the same windows bound
  // every rank's plan.
  const uint64_t windows = (o.batch_size + r_min - 2) / r_min + 2;
  return static_cast<uint32_t>(std::min<uint64_t>(f, windows * w));
}

}  // namespace sluice::pipeline_internal
