// Clocks for measuring work.
// Thread safety: stateless.
#ifndef SLUICE_COMMON_CLOCK_H_
#define SLUICE_COMMON_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace sluice {

// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID): advances only while
// the thread runs on a core, so it tells work from waiting for one.
inline int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace sluice

#endif  // SLUICE_COMMON_CLOCK_H_
