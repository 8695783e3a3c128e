#include "engine/memory.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/enum_names.h"

namespace sluice {

namespace {
constexpr auto kMemoryTagNames = MakeEnumNames<MemoryTag>({
    {MemoryTag::kParameters, "parameters"},
    {MemoryTag::kGradients, "gradients"},
    {MemoryTag::kOptimizerState, "optimizer state"},
    {MemoryTag::kActivations, "activations"},
    {MemoryTag::kInputBatches, "input batches"},
    {MemoryTag::kWorkspace, "workspace"},
});
}  // namespace

absl::string_view MemoryTagName(MemoryTag tag) { return kMemoryTagNames.Name(tag); }

void MemoryLedger::Add(MemoryTag tag, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  const int t = static_cast<int>(tag);
  report_.current_bytes[t] += bytes;
  report_.peak_bytes[t] = std::max(report_.peak_bytes[t], report_.current_bytes[t]);
  report_.total_current += bytes;
  report_.total_peak = std::max(report_.total_peak, report_.total_current);
}

void MemoryLedger::Remove(MemoryTag tag, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  report_.current_bytes[static_cast<int>(tag)] -= bytes;
  report_.total_current -= bytes;
}

MemoryReport MemoryLedger::report() const {
  absl::MutexLock lock(&mu_);
  return report_;
}

MemoryFormula ComputeMemoryFormula(const ModelConfig& model, const OptimizerConfig& opt,
                                   int max_batch) {
  constexpr int64_t kF32 = 4;
  MemoryFormula f;
  f.parameters = kF32 * model.num_parameters();
  f.gradients = f.parameters;
  f.optimizer_state = f.parameters * opt.state_slots();
  int64_t widths = 0;
  for (size_t k = 1; k < model.layers.size(); ++k) widths += model.layers[k];
  f.activations = 2 * kF32 * int64_t{max_batch} * widths;
  return f;
}

namespace {
std::string Bytes(int64_t b) {
  if (b >= (int64_t{1} << 20)) return absl::StrFormat("%.2f MiB", b / 1048576.0);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrCat(b, " B");
}
}  // namespace

std::string FormatMemoryReport(const MemoryReport& report, const MemoryFormula& formula) {
  std::string out = absl::StrFormat("%-16s %14s %14s %14s\n", "memory", "allocated (B)", "peak (B)",
                                    "formula (B)");
  auto row = [&](MemoryTag tag, const std::string& formula_text) {
    const int t = static_cast<int>(tag);
    absl::StrAppendFormat(&out, "%-16s %14d %14d %14s  %s\n", MemoryTagName(tag),
                          report.current_bytes[t], report.peak_bytes[t], formula_text,
                          Bytes(report.current_bytes[t]));
  };
  row(MemoryTag::kParameters, absl::StrCat(formula.parameters));
  row(MemoryTag::kGradients, absl::StrCat(formula.gradients));
  row(MemoryTag::kOptimizerState, absl::StrCat(formula.optimizer_state));
  row(MemoryTag::kActivations, absl::StrCat(formula.activations));
  row(MemoryTag::kInputBatches, "-");
  row(MemoryTag::kWorkspace, "-");
  const int64_t formula_tags =
      report.bytes(MemoryTag::kParameters) + report.bytes(MemoryTag::kGradients) +
      report.bytes(MemoryTag::kOptimizerState) + report.bytes(MemoryTag::kActivations);
  absl::StrAppendFormat(&out, "%-16s %14d %14s %14d  %s (params+grads+optimizer+activations)%s\n",
                        "formula total", formula_tags, "", formula.total(), Bytes(formula.total()),
                        formula_tags == formula.total() ? "" : "  MISMATCH");
  absl::StrAppendFormat(&out, "%-16s %14d %14d %14s  %s (peak %s)\n", "all tags",
                        report.total_current, report.total_peak, "-", Bytes(report.total_current),
                        Bytes(report.total_peak));
  return out;
}

int64_t HostMemoryReport::accounted() const {
  int64_t sum = 0;
  for (const HostMemoryLine& l : lines) sum += l.bytes;
  return sum;
}

std::string FormatHostMemoryReport(const HostMemoryReport& host) {
  std::string out = absl::StrFormat("%-34s %14s\n", "host memory", "bytes");
  auto row = [&out](absl::string_view name, int64_t bytes) {
    absl::StrAppendFormat(&out, "%-34s %14d  %s\n", name, bytes,
                          bytes < 0 ? absl::StrCat("-", Bytes(-bytes)) : Bytes(bytes));
  };
  row("process baseline (program, libs)", host.baseline_rss);
  for (const HostMemoryLine& l : host.lines) row(l.name, l.bytes);
  row("accounted (baseline + lines)", host.baseline_rss + host.accounted());
  row("peak resident (VmHWM)", host.peak_rss);
  row("unaccounted (peak - accounted)", host.unaccounted());
  return out;
}

ProcessMemory ReadProcessMemory() {
  ProcessMemory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    int64_t kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %" SCNd64 " kB", &kb) == 1) m.rss_bytes = kb * 1024;
    if (std::sscanf(line.c_str(), "VmHWM: %" SCNd64 " kB", &kb) == 1) m.peak_rss_bytes = kb * 1024;
  }
  return m;
}

}  // namespace sluice
