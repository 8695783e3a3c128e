// Memory accounting: every allocation of a backend is tagged, so sluice-train can show
// total = parameters + activations + gradients + optimizer state (+ inputs, workspace) and
// check it against what was actually allocated.
#ifndef SLUICE_ENGINE_MEMORY_H_
#define SLUICE_ENGINE_MEMORY_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/model.h"

namespace sluice {

enum class MemoryTag : int {
  kParameters = 0,
  kGradients,
  kOptimizerState,
  kActivations,
  kInputBatches,
  kWorkspace,
  kCount
};
absl::string_view MemoryTagName(MemoryTag tag);  // "parameters", "gradients", ...

struct MemoryReport {
  std::array<int64_t, static_cast<int>(MemoryTag::kCount)> current_bytes{};
  std::array<int64_t, static_cast<int>(MemoryTag::kCount)> peak_bytes{};
  int64_t total_current = 0;
  int64_t total_peak = 0;
  int64_t bytes(MemoryTag t) const { return current_bytes[static_cast<int>(t)]; }
};

// The analytic figures for an MLP, fp32 unless noted:
//   parameters = 4 * num_parameters; gradients = parameters; optimizer_state = slots * parameters;
//   activations = 4 * max_batch * (sum of hidden+output widths) * 2 (pre/post activation and
//   gradient buffers) -- the exact formula is documented next to the implementation and in
//   docs/architecture.md, and tested against what the backends allocate.
struct MemoryFormula {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t activations = 0;
  int64_t total() const { return parameters + gradients + optimizer_state + activations; }
};
MemoryFormula ComputeMemoryFormula(const ModelConfig& model, const OptimizerConfig& opt,
                                   int max_batch);

// Multi-line human-readable table: bytes per tag, peak, and the formula beside it.
std::string FormatMemoryReport(const MemoryReport& report, const MemoryFormula& formula);

}  // namespace sluice

#endif  // SLUICE_ENGINE_MEMORY_H_
