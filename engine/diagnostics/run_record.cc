#include "engine/diagnostics/run_record.h"

#include <utility>

namespace sluice {

RunRecord RunRecordFromStats(PipelineStats pipeline, ComputeStats compute) {
  RunRecord r;
  r.pipeline = std::move(pipeline);
  r.compute = std::move(compute);
  r.device = r.compute.device;
  r.samples = r.compute.samples;
  // The span opens when the first batch was asked for: the pipeline's start when it started
  // first (the wait for the first batch is in the span, as it is in the wall clock).
  int64_t start = r.compute.first_start_ns;
  if (r.pipeline.start_ns > 0 && (start == 0 || r.pipeline.start_ns < start)) {
    start = r.pipeline.start_ns;
  }
  r.train_seconds = r.compute.last_end_ns > start ? (r.compute.last_end_ns - start) * 1e-9 : 0.0;
  return r;
}

}  // namespace sluice
