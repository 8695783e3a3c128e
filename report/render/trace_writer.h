// Chrome trace-event JSON of a run (--trace FILE): opens in Perfetto (ui.perfetto.dev) and
// chrome://tracing. docs/bottleneck.md ("Timeline") describes the tracks.
//
// Tracks (pid 1, "sluice"; in a data-parallel run pid R, "rank R", for the run's rank R):
//   "pipeline thread N"     one per TraceSpan.thread: "X" events read / decompress / preprocess
//                           with args {frame} (read, decompress) or {batch} (the others)
//   "pinned buffer wait"    kPinnedWait spans, when the pipeline recorded any
//   "copy stream"           kH2D spans: each copy's device time from the copy stream's events,
//                           placed on the host clock (device::Event::HostNanos)
//   "delivery (lease held)" kDelivery spans, when recorded
//   "compute"               one "X" per train step (ComputeSpan), args {batch}; named
//                           "compute stream (device time)" on a device backend, where the span
//                           is the step's device time from the compute stream's events
// Counters ("C" events): "pinned pool occupancy" and, on a device, "device ring occupancy",
// derived from the spans (see BuildChromeTrace).
// otherData.copy_hidden_share: CopyHiddenShare below.
// Timestamps: microseconds relative to the earliest span of either kind.
//
// Errors: WriteChromeTrace returns the Env's I/O errors; an empty trace is valid (metadata only).
// Thread safety: pure functions of their arguments.
#ifndef SLUICE_REPORT_RENDER_TRACE_WRITER_H_
#define SLUICE_REPORT_RENDER_TRACE_WRITER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/env.h"
#include "nlohmann/json.hpp"
#include "report/record/run_record.h"

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

// The share of copy-stream time (kH2D spans) that overlaps a compute span: the copy time hidden
// behind compute, 0..1; -1 when the run recorded no copy.
double CopyHiddenShare(const RunRecord& run);

// Data parallel: one trace of every rank's BuildChromeTrace (index = rank, each its own pid),
// for rank 0 to write. `shared_clock`: the ranks share a steady clock (one host), so each
// rank's events are shifted by its time origin minus the earliest; else each rank's timeline
// starts at its own first span. otherData.ranks holds each rank's otherData.
nlohmann::json MergeRankTraces(const std::vector<nlohmann::json>& traces, bool shared_clock);

// BuildChromeTrace(run) written to `path` atomically.
absl::Status WriteChromeTrace(Env* env, const std::string& path, const RunRecord& run);

}  // namespace sluice

#endif  // SLUICE_REPORT_RENDER_TRACE_WRITER_H_
