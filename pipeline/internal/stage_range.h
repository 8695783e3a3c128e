// StageRange: an NVTX range around a stage body, so Nsight Systems shows the pipeline's stages on
// the same timeline as the CUDA streams. CUDA builds only (nvtx3 is header-only); elsewhere it
// compiles to nothing. Used by the stage bodies of PipelineCore (pipeline_core_frame_stages.cc,
// pipeline_core_batch_stages.cc).
#ifndef SLUICE_PIPELINE_INTERNAL_STAGE_RANGE_H_
#define SLUICE_PIPELINE_INTERNAL_STAGE_RANGE_H_

#if defined(SLUICE_DEVICE_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace sluice::pipeline_internal {

struct StageRange {
#if defined(SLUICE_DEVICE_CUDA)
  explicit StageRange(const char* name) { nvtxRangePushA(name); }
  ~StageRange() { nvtxRangePop(); }
#else
  explicit StageRange(const char*) {}
#endif
  StageRange(const StageRange&) = delete;
  StageRange& operator=(const StageRange&) = delete;
};

}  // namespace sluice::pipeline_internal

#endif  // SLUICE_PIPELINE_INTERNAL_STAGE_RANGE_H_
