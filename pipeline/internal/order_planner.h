// The order planner: which samples form each batch of an epoch, which frames must be read to
// build them, and in what order. A pure function of (split layout, seed, epoch, options).
//
// Order (docs/architecture.md, "Order"): frames are shuffled with a PRNG seeded by (seed, epoch),
// cut into windows of W consecutive frames of that order, and the records of each window are
// shuffled with a PRNG seeded by (seed, epoch, window). The epoch's sample sequence is the
// concatenation of the shuffled windows; global batch s is positions [s*B, (s+1)*B). Shuffle
// off: file order. Nothing here depends on threads, pool sizes or timing, and the global
// sequence never depends on the world size.
//
// Data parallel ("Data parallel" in docs/architecture.md): rank r of world_size N plans only
// its slice of each global batch. The batch's samples are sorted by (position of their frame
// in the epoch's frame order, position in the sequence) and cut into N contiguous chunks whose
// sizes differ by at most one (the first count % N ranks get one more); chunk r is rank r's
// local batch, delivered in sequence order. Cutting by frame order gives each rank a stable
// sub-range of every window's frames, so few frames are decoded by more than one rank. With
// N = 1 the local batch is the global batch.
//
// Thread safety: an EpochPlan is immutable once built and may be shared across threads.
#ifndef SLUICE_PIPELINE_INTERNAL_ORDER_PLANNER_H_
#define SLUICE_PIPELINE_INTERNAL_ORDER_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::pipeline_internal {

// One frame of the split, in file order (global frame id = index in SplitLayout::frames).
struct FrameRef {
  uint32_t shard = 0;
  uint32_t frame = 0;         // within the shard
  uint64_t first_record = 0;  // within the split
  uint32_t record_count = 0;
};

struct SplitLayout {
  std::vector<FrameRef> frames;
  uint64_t record_count = 0;
};

struct OrderOptions {
  uint64_t seed = 0;
  bool shuffle = true;
  uint32_t window_frames = 0;  // W; 0 or >= frame count: one window (a full shuffle)
  uint32_t batch_size = 32;
  bool drop_last = false;
  // Data parallel: this process's slice of every global batch (batch_size is global).
  uint32_t rank = 0;
  uint32_t world_size = 1;
};

// Steps (global batches) in one full epoch; the same on every rank.
uint64_t StepsPerEpoch(uint64_t records, const OrderOptions& options);

// This rank's plan of one epoch, from step `first_step` to its end. Local batch i is this
// rank's slice of global batch first_step + i; every step has a local batch, possibly empty
// (with world_size > 1).
struct EpochPlan {
  uint64_t epoch = 0;
  uint64_t first_step = 0;
  uint32_t batch_size = 0;  // global B
  uint32_t rank = 0;
  uint32_t world_size = 1;
  // Split-wide record ids of this rank's samples in delivery order: its local batches from
  // step first_step on, concatenated.
  std::vector<uint32_t> order;
  // CSR: local batch i is order[batch_offsets[i], batch_offsets[i + 1]).
  std::vector<uint32_t> batch_offsets;
  // Samples of global batch first_step + i over all ranks (before corrupt-frame skips).
  std::vector<uint32_t> batch_global_size;
  // For each entry of `order`: the slot (index into read_frames) of its frame and its index
  // within that frame.
  std::vector<uint32_t> sample_slot;
  std::vector<uint32_t> sample_offset;
  // For each entry of `order`: its position in the epoch's global sequence (step * B + its
  // place in the global batch), the same on every rank and for every start step: the index
  // that random transforms draw from.
  std::vector<uint32_t> sample_position;
  // Frames to read, in read order (global frame ids). Only frames holding at least one sample
  // of `order` appear: a resumed epoch does not read frames of the steps it skips, and a rank
  // does not read frames holding none of its samples.
  std::vector<uint32_t> read_frames;
  // CSR: the distinct slots batch i needs, and the batches that need slot k.
  std::vector<uint32_t> batch_slot_begin, batch_slots;
  std::vector<uint32_t> slot_batch_begin, slot_batches;
  // Largest number of decoded frames that must be held at once so that the earliest
  // unassembled batch can always be built (the deadlock-free minimum of the frame budget).
  uint32_t min_frames_alive = 0;

  uint32_t num_batches() const { return static_cast<uint32_t>(batch_offsets.size() - 1); }
  uint32_t batch_begin(uint32_t i) const { return batch_offsets[i]; }
  uint32_t batch_end(uint32_t i) const { return batch_offsets[i + 1]; }
};

// Plans this rank's share of epoch `epoch` from `first_step`. kInvalidArgument for a bad
// layout/options (world_size 0, rank >= world_size) or a first_step past the end of the epoch.
absl::StatusOr<EpochPlan> PlanEpoch(const SplitLayout& layout, const OrderOptions& options,
                                    uint64_t epoch, uint64_t first_step);

// An upper bound of EpochPlan::min_frames_alive over every epoch, start step and rank,
// computed from the layout alone (so the frame budget can be fixed before any epoch is planned).
uint32_t FramesAliveBound(const SplitLayout& layout, const OrderOptions& options);

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_ORDER_PLANNER_H_
