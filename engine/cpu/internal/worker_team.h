// WorkerTeam: a fixed team of threads that run one function together, step after step, with
// little latency. The CPU backend splits each batch across the team (cpu_backend.cc).
//
//   WorkerTeam team(2);
//   team.Run([&](int t) { ... slice t ...; team.Barrier(); ... range t ...; });
//
// Run(fn) calls fn(t) once for every t in [0, size()): t = 0 on the calling thread, the others
// on the team's own threads, and returns when every call has returned. Which thread runs which
// t never changes, and nothing is scheduled dynamically, so work split by t is reproducible.
// Barrier() may be called from inside fn; every member must call it the same number of times.
// Waiting threads spin for a while (a step of the reference MLP is ~100 us, and the next one
// follows within microseconds) and then sleep on a futex (std::atomic::wait), so an idle team
// costs no CPU.
// Thread safety: Run is called by one thread at a time; fn must not throw.
#ifndef SLUICE_ENGINE_CPU_INTERNAL_WORKER_TEAM_H_
#define SLUICE_ENGINE_CPU_INTERNAL_WORKER_TEAM_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace sluice::cpu_internal {

class WorkerTeam {
 public:
  explicit WorkerTeam(int size);  // size >= 1; size - 1 threads are started
  ~WorkerTeam();                  // joins the threads
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  int size() const { return size_; }
  void Run(absl::FunctionRef<void(int)> fn);
  void Barrier();

 private:
  void WorkerLoop(int t);

  const int size_;
  std::vector<std::thread> threads_;
  std::optional<absl::FunctionRef<void(int)>> fn_;
  // Run: generation_ counts the runs started; pending_ the members still running this one.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};  // workers (or the caller) parked in an atomic wait
  std::atomic<bool> stop_{false};
  // Barrier: arrivals in the current phase, and the phase number.
  std::atomic<int> barrier_count_{0};
  std::atomic<uint64_t> barrier_phase_{0};
};

}  // namespace sluice::cpu_internal

#endif  // SLUICE_ENGINE_CPU_INTERNAL_WORKER_TEAM_H_
