// Limits: the documented maxima of thread and concurrency settings, and checks of a size
// against the memory the process can actually get (docs/limits.md).
//
// Every check returns a one-line status naming what was asked for, the bound and why:
//   kInvalidArgument     a setting above its maximum (a usage error)
//   kResourceExhausted   a size that overflows 64 bits or exceeds the available memory
// Thread safety: all functions are thread-safe; they read /proc and getrlimit each call.
#ifndef SLUICE_COMMON_LIMITS_H_
#define SLUICE_COMMON_LIMITS_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

// std::thread::hardware_concurrency(), at least 1.
int HardwareThreads();

// The cores this process may run on: the CPUs of its affinity mask (taskset, mpirun's
// binding, Slurm's cpuset), capped by its cgroup's CPU quota (cpu.max / cpu.cfs_quota_us,
// rounded up); at least 1. Thread settings of 0 ("auto") mean this many, so N ranks bound to
// their own cores on one machine do not oversubscribe it.
int UsableCores();

// The most threads any one thread-count setting may ask for: 4 x hardware threads.
int MaxThreads();

// kInvalidArgument "--<flag>: N is more than the maximum M (4 x the H hardware threads)" when
// `value` > MaxThreads(); negative values are the caller's to reject.
absl::Status CheckThreadCount(absl::string_view flag, int64_t value);

// kInvalidArgument "--<flag>: N is more than the maximum M (<why>)" when value > max.
absl::Status CheckAtMost(absl::string_view flag, int64_t value, int64_t max, absl::string_view why);

// `value` exactly: a whole number as an integer ("10000001"), any other as the fewest
// significant digits that read back as the same double ("1e-09", "0.001", "inf").
std::string ExactNumber(double value);

// kInvalidArgument "--<flag>: V is not in [min, max] (<why>)" when `value` is outside the
// range or not a finite number; V, min and max as ExactNumber prints them.
absl::Status CheckInRange(absl::string_view flag, double value, double min, double max,
                          absl::string_view why);

// Makes room for `files` more open files in this process: when the files open now, plus
// `files`, plus a margin of 64 exceed the soft RLIMIT_NOFILE (`ulimit -n`, often 1024), the
// soft limit is raised to the hard one. kResourceExhausted when even the hard limit is too
// small, naming `what` and the sum (docs/limits.md, "Open files"): "<what>: needs 59 <files_are>
// + 64 spare + 12 already open = 135 open files; this process may open at most 100 (ulimit -n:
// soft 100, hard 100); ...".
absl::Status ReserveOpenFiles(uint64_t files, absl::string_view files_are, absl::string_view what);

// Whether `threads` more threads can run at once in this process now: starts them, holds them
// until all have started, and joins them. kResourceExhausted naming `what` and the process
// limit (`ulimit -u`) when the system refuses one; a thread pool that cannot start its workers
// would otherwise wait for them forever (oneTBB) or abort (std::thread).
absl::Status CheckThreadsCanStart(int threads, absl::string_view what);

// The product of `factors`, or kResourceExhausted "<what>: A x B x ... overflows 64 bits".
absl::StatusOr<uint64_t> CheckedProduct(absl::string_view what,
                                        std::initializer_list<uint64_t> factors);

// What this process can still allocate: the smaller of the kernel's MemAvailable and, under an
// address-space limit (ulimit -v, RLIMIT_AS), the limit minus the address space already in use.
struct AvailableMemory {
  uint64_t bytes = 0;
  std::string limited_by;  // "available RAM" or "the address-space limit (ulimit -v N KiB)"
};
AvailableMemory GetAvailableMemory();

// The address-space limit in bytes (RLIMIT_AS soft limit), or 0 when unlimited.
uint64_t AddressSpaceLimit();

// The address space this process already uses (VmSize), in bytes; 0 when unknown.
uint64_t AddressSpaceInUse();

// kResourceExhausted "<what> needs N bytes (X GiB), more than the M bytes (Y GiB) available
// (<limited_by>)" when `bytes` exceeds GetAvailableMemory().
absl::Status CheckMemory(absl::string_view what, uint64_t bytes);

// Human-readable byte count: "812.5 MiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace sluice

#endif  // SLUICE_COMMON_LIMITS_H_
