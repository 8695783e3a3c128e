// The device side of the ceilings (ceilings_device.cc), called by Ceilings::Measure
// (ceilings.cc): H2D copy rates through the device layer and the compute rate of the run's
// backend. Private to ceilings*.cc.
#ifndef SLUICE_ENGINE_DIAGNOSTICS_INTERNAL_CEILINGS_INTERNAL_H_
#define SLUICE_ENGINE_DIAGNOSTICS_INTERNAL_CEILINGS_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/diagnostics/ceilings.h"
#include "pipeline/batch.h"

namespace sluice::ceilings_internal {

// Pinned and pageable H2D rates of batches of `sample_bytes` + `label_bytes`; a ceiling that
// cannot be measured (no CUDA device) is left unmeasured with its reason.
void MeasureH2D(const CeilingOptions& options, size_t sample_bytes, size_t label_bytes,
                uint32_t batch_size, double seconds, Ceiling* pinned, Ceiling* pageable);
// Train steps/s of the options' backend on `batches`; backend creation errors.
absl::Status MeasureCompute(const CeilingOptions& options, const std::vector<BatchView>& batches,
                            double seconds, Ceiling* out);

}  // namespace sluice::ceilings_internal

#endif  // SLUICE_ENGINE_DIAGNOSTICS_INTERNAL_CEILINGS_INTERNAL_H_
