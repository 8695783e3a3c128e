// Chrome trace-event JSON of a run (--trace FILE): opens in Perfetto (ui.perfetto.dev) and
// chrome://tracing. docs/bottleneck.md ("Timeline") describes the tracks.
//
// Tracks (pid 1, "sluice"):
//   "pipeline thread N"     one per TraceSpan.thread: "X" events read / decompress / preprocess
//                           with args {frame} (read, decompress) or {batch} (the others)
//   "pinned buffer wait"    kPinnedWait spans, when the pipeline recorded any
//   "cuda copy stream"      kH2D spans (copy times from CUDA events, on the host clock)
//   "delivery (lease held)" kDelivery spans, when recorded
//   "compute"               one "X" per train step (ComputeSpan), args {batch}; named
//                           "cuda compute stream (host enqueue)" on CUDA: the span is the host
//                           time in TrainStep, not GPU time
// Counters ("C" events): "pinned pool occupancy" and, on CUDA, "device ring occupancy", derived
// from the spans (see BuildChromeTrace).
// Timestamps: microseconds relative to the earliest span of either kind.
//
// Errors: WriteChromeTrace returns the Env's I/O errors; an empty trace is valid (metadata only).
// Thread safety: pure functions of their arguments.
#ifndef SLUICE_ENGINE_DIAGNOSTICS_TRACE_WRITER_H_
#define SLUICE_ENGINE_DIAGNOSTICS_TRACE_WRITER_H_

#include <string>

#include "absl/status/status.h"
#include "common/env.h"
#include "engine/diagnostics/run_record.h"
#include "nlohmann/json.hpp"

namespace sluice {

// Track ids (tid) of the non-thread tracks; pipeline threads use their TraceSpan.thread.
inline constexpr int kTraceTidPinnedWait = 100000;
inline constexpr int kTraceTidCopyStream = 100001;
inline constexpr int kTraceTidDelivery = 100002;
inline constexpr int kTraceTidCompute = 100003;

// The trace as a JSON object {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
// Events are sorted by timestamp (metadata first).
//
// Occupancy derivation: batch b holds a pinned buffer from the start of its preprocess span
// until the first of: the end of its kH2D span (CUDA: the buffer returns when the copy
// completes), the end of its kDelivery span (host batches: the lease is released), the end of
// its compute span (the trainer releases the lease right after TrainStep). A device ring slot
// is held from the start of its kH2D span until the end of its compute span (the slot is
// reused only after the step that read it; GPU completion is not on the host clock, so this
// is a lower bound). Batches without an end are not counted.
nlohmann::json BuildChromeTrace(const RunRecord& run);

// BuildChromeTrace(result) written to `path` atomically.
absl::Status WriteChromeTrace(Env* env, const std::string& path, const RunRecord& run);

}  // namespace sluice

#endif  // SLUICE_ENGINE_DIAGNOSTICS_TRACE_WRITER_H_
