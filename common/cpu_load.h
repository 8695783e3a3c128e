// What else ran on this process's cores: other processes' CPU time over a span, from the
// kernel's per-CPU counters (/proc/stat) of the CPUs in this process's affinity mask, minus this
// process's own CPU time. The resource model (report/model/resource_model.h) counts only the
// cores left to the run, so a machine busier than usual does not make it predict a rate the
// run could not reach.
//
//   CpuLoadSnapshot before = TakeCpuLoadSnapshot();
//   ... the run ...
//   std::optional<double> other = OtherCoresBusy(before, TakeCpuLoadSnapshot());
//
// In a VM, steal time (the host running other guests on this guest's CPUs) counts as other
// processes' time: those cores were not the run's either.
// Thread safety: free functions; a snapshot is a plain value.
#ifndef SLUICE_COMMON_CPU_LOAD_H_
#define SLUICE_COMMON_CPU_LOAD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice {

struct CpuLoadSnapshot {
  int64_t wall_ns = 0;         // steady clock
  int64_t process_cpu_ns = 0;  // CLOCK_PROCESS_CPUTIME_ID: every thread of this process
  // Busy time (user, nice, system, irq, softirq, steal) summed over the CPUs of the affinity
  // mask, from /proc/stat; nullopt when it cannot be read (then nothing is claimed).
  std::optional<int64_t> busy_ns;
};

CpuLoadSnapshot TakeCpuLoadSnapshot();

// The cores other processes kept busy on average between `a` and `b` (>= 0); nullopt when
// either snapshot lacks the per-CPU counters or the span is empty. The counters tick at
// 1/_SC_CLK_TCK (10 ms), so a span under a second gives a rough figure.
std::optional<double> OtherCoresBusy(const CpuLoadSnapshot& a, const CpuLoadSnapshot& b);
// The cores this process's own threads kept busy on average between `a` and `b`.
double ProcessCoresBusy(const CpuLoadSnapshot& a, const CpuLoadSnapshot& b);

// Parses /proc/stat's text: the busy time, in clock ticks, summed over the "cpuN" lines whose
// N is set in `mask` (mask[N] true; CPUs past its end are not counted); nullopt when no such
// line parses. Exposed for tests.
std::optional<int64_t> BusyTicksFromProcStat(const std::string& text,
                                             const std::vector<bool>& mask);

}  // namespace sluice

#endif  // SLUICE_COMMON_CPU_LOAD_H_
