#include "engine/diagnostics/run_record.h"

#include <utility>

namespace sluice {

RunRecord RunRecordFromStats(PipelineStats pipeline, ComputeStats compute) {
  RunRecord r;
  r.pipeline = std::move(pipeline);
  r.compute = std::move(compute);
  r.device = r.compute.device;
  r.samples = r.compute.samples;
  r.train_seconds = (r.compute.last_end_ns - r.compute.first_start_ns) * 1e-9;
  return r;
}

}  // namespace sluice
