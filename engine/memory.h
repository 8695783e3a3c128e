// Memory accounting: every allocation of a backend is tagged, so sluice-train can show
// total = parameters + activations + gradients + optimizer state (+ inputs, workspace) and
// check it against what was actually allocated.
#ifndef SLUICE_ENGINE_MEMORY_H_
#define SLUICE_ENGINE_MEMORY_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
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

// Records what a backend allocates, per tag, and the high-water marks. Backends call Add/Remove
// around every allocation (the CPU backend through HostBuffer in engine/cpu/; the CUDA backend
// around cudaMalloc/cudaFree).
// Thread safety: thread safe (one mutex; allocations are rare, never per step).
class MemoryLedger {
 public:
  void Add(MemoryTag tag, int64_t bytes);
  void Remove(MemoryTag tag, int64_t bytes);
  MemoryReport report() const;

 private:
  mutable absl::Mutex mu_;
  MemoryReport report_ ABSL_GUARDED_BY(mu_);
};

// The analytic figures for an MLP with L Linear layers of widths n_0 (inputs) .. n_L (classes),
// fp32 (4 bytes per value), P = num_parameters = sum_k (n_k * n_{k+1} + n_{k+1}):
//   parameters      = 4 * P
//   gradients       = 4 * P
//   optimizer_state = 4 * P * state_slots   (0: SGD, 1: SGD with momentum, 2: AdamW m and v)
//   activations     = 2 * 4 * max_batch * (n_1 + ... + n_L)
//     one output buffer per Linear (post-ReLU for hidden layers, logits for the last) and one
//     gradient buffer of the same shape; ReLU backward reads the post-ReLU output (y > 0), so no
//     pre-activation copy is kept, and the input layer needs no gradient buffer.
// Not in the formula, but tagged and reported: input batches (the normalized f32 copy,
// 4 * max_batch * n_0 when the batch is u8 or f16) and workspace (backend scratch, e.g. the
// CPU backend's sparse-input index lists). Mixed precision adds reduced-precision operand copies
// on the CUDA backend; see docs/architecture.md. Tested against what the backends allocate.
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

// The host side of a run: what explains the process's peak resident memory (docs/limits.md,
// "Host memory"). `baseline_rss` is the resident memory before the job created its datasets,
// pipelines and backend (the program, its shared libraries, the flags); `lines` are the job's
// big host allocations, each computed from what was allocated (pinned batch pools, decoded-frame
// buffers, the backend's tagged memory when it lives on the host); `peak_rss` is the high-water
// mark when the report was made. What is left (malloc arenas and thread stacks, stored frames in
// flight, small objects) is `unaccounted()`.
struct HostMemoryLine {
  std::string name;
  int64_t bytes = 0;
};
struct HostMemoryReport {
  int64_t baseline_rss = 0;
  std::vector<HostMemoryLine> lines;
  int64_t peak_rss = 0;
  int64_t accounted() const;
  int64_t unaccounted() const { return peak_rss - baseline_rss - accounted(); }
};
// The host table: baseline, each line, peak resident and the unaccounted remainder.
std::string FormatHostMemoryReport(const HostMemoryReport& host);

// This process's resident memory now and its high-water mark (VmRSS and VmHWM of
// /proc/self/status, in bytes); zeros where /proc is not available.
struct ProcessMemory {
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;
};
ProcessMemory ReadProcessMemory();

}  // namespace sluice

#endif  // SLUICE_ENGINE_MEMORY_H_
