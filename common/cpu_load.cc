#include "common/cpu_load.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

namespace sluice {
namespace {

int64_t ClockNs(clockid_t id) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The CPUs this process may run on; every CPU when the mask cannot be read.
std::vector<bool> AffinityMask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<bool> mask(CPU_SETSIZE, false);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::vector<bool>(CPU_SETSIZE, true);
  for (int i = 0; i < CPU_SETSIZE; ++i) mask[i] = CPU_ISSET(i, &set);
  return mask;
}

}  // namespace

std::optional<int64_t> BusyTicksFromProcStat(const std::string& text,
                                             const std::vector<bool>& mask) {
  std::istringstream in(text);
  std::string line;
  int64_t busy = 0;
  bool any = false;
  while (std::getline(in, line)) {
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice"; the aggregate
    // line "cpu " has no number and is skipped.
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') {
      continue;
    }
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (!(fields >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq)) continue;
    if (!(fields >> steal)) steal = 0;  // kernels before 2.6.11 have no steal column
    if (cpu < 0 || cpu >= static_cast<int>(mask.size()) || !mask[cpu]) continue;
    // Niced time counts: with the scheduler's autogroups (Debian's default), a niced process
    // of another session takes its share of the cores all the same. Guest time is in user.
    busy += user + nice + system + irq + softirq + steal;
    any = true;
  }
  return any ? std::optional<int64_t>(busy) : std::nullopt;
}

CpuLoadSnapshot TakeCpuLoadSnapshot() {
  CpuLoadSnapshot s;
  s.wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  s.process_cpu_ns = ClockNs(CLOCK_PROCESS_CPUTIME_ID);
  std::ifstream f("/proc/stat");
  if (!f) return s;
  std::stringstream text;
  text << f.rdbuf();
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  if (ticks_per_s <= 0) return s;
  if (std::optional<int64_t> ticks = BusyTicksFromProcStat(text.str(), AffinityMask())) {
    s.busy_ns = *ticks * (1'000'000'000 / ticks_per_s);
  }
  return s;
}

double ProcessCoresBusy(const CpuLoadSnapshot& a, const CpuLoadSnapshot& b) {
  const int64_t wall = b.wall_ns - a.wall_ns;
  return wall > 0
             ? std::max<int64_t>(0, b.process_cpu_ns - a.process_cpu_ns) / static_cast<double>(wall)
             : 0.0;
}

std::optional<double> OtherCoresBusy(const CpuLoadSnapshot& a, const CpuLoadSnapshot& b) {
  const int64_t wall = b.wall_ns - a.wall_ns;
  if (!a.busy_ns || !b.busy_ns || wall <= 0) return std::nullopt;
  const int64_t others = (*b.busy_ns - *a.busy_ns) - (b.process_cpu_ns - a.process_cpu_ns);
  return others > 0 ? static_cast<double>(others) / wall : 0.0;
}

}  // namespace sluice
