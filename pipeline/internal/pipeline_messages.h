// The messages that flow through the pipeline's graph, and the per-epoch state they share.
// Plain data, free of TBB, so the parts that queue them (BatchScheduler, DeviceRing,
// DeliveryQueue) can be built and tested without the flow graph.
//
// Ownership: the big parts (an epoch's decoded frames, a batch's payload) are shared, so
// messages stay cheap to copy (TBB buffers copy messages).
// Thread safety: see each field; the structs themselves carry no lock.
#ifndef SLUICE_PIPELINE_INTERNAL_PIPELINE_MESSAGES_H_
#define SLUICE_PIPELINE_INTERNAL_PIPELINE_MESSAGES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/internal/order_planner.h"
#include "pipeline/pinned_buffer_pool.h"

namespace sluice::pipeline_internal {

// A decoded frame of one epoch. `data` points at `owned` or at a what-if cache entry.
struct DecodedFrame {
  const char* data = nullptr;
  std::unique_ptr<char[]> owned;
  uint32_t records = 0;
  bool corrupt = false;
};

// Mutable state of one planned epoch. A frame is written by decompress before it counts
// itself off its batches' `batch_missing` (acq_rel), so whoever sees a count reach 0 sees
// every frame of that batch; it is read by assemble and freed by the last batch needing it.
struct EpochRun {
  EpochPlan plan;
  uint64_t first_batch_id = 0;  // run-wide id of plan batch 0
  uint64_t first_frame_seq = 0;
  std::vector<DecodedFrame> frames;                        // by slot
  std::unique_ptr<std::atomic<uint32_t>[]> slot_refs;      // batches still to assemble, by slot
  std::unique_ptr<std::atomic<uint32_t>[]> batch_missing;  // frames still to decode, by batch
};

// A frame's stored bytes, read into a recycled buffer (PipelineCore's stored-frame pool).
struct StoredFrame {
  std::unique_ptr<char[]> bytes;
  uint32_t size = 0;
};

// Message read -> decompress. Copyable (TBB buffers copy messages); big parts are shared.
struct FrameMsg {
  std::shared_ptr<EpochRun> run;
  uint32_t slot = 0;
  uint64_t seq = 0;  // run-wide frame sequence number
  bool is_last = false;
  // Null when served from the what-if read cache; decompress returns its buffer to the pool.
  std::shared_ptr<StoredFrame> stored;
};

struct BatchPayload {
  PinnedBuffer buffer;
  const char* samples = nullptr;  // into `buffer` or the what-if prebuilt batch
  const int32_t* labels = nullptr;
  const uint32_t* record_ids = nullptr;  // beside the labels; `size` of them
  uint32_t size = 0;
  uint32_t device_slot = 0;
};

// Message assemble -> sequencer -> upload -> delivery.
struct BatchMsg {
  std::shared_ptr<EpochRun> run;
  uint32_t index = 0;  // within run->plan
  uint64_t id = 0;     // run-wide batch id == sequencer order
  bool is_last = false;
  std::shared_ptr<BatchPayload> payload;  // null until assembled (or when cancelled)
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_PIPELINE_MESSAGES_H_
