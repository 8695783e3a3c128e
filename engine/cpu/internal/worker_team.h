// WorkerTeam: a persistent team of threads that run one function together, step after step,
// with little latency. The CPU backend splits each batch across the team (cpu_backend.cc).
//
//   std::atomic<int> next{0};
//   team.Run([&] { for (int s; (s = next.fetch_add(1)) < n;) Work(s); });
//
// Run(fn) calls fn on the calling thread and on every team thread that wakes up while the run
// is open, and returns when the caller's fn has returned and no team thread is inside fn. fn
// therefore claims its work (an atomic counter, as above), so that every item is done exactly
// once by whichever thread gets to it first: a team thread the OS has not scheduled (a busy
// machine) delays nothing, and the caller does the work alone. A team thread may call fn more
// than once per run, or not at all. What an item computes must not depend on the thread that
// runs it; then the results do not depend on the scheduling.
// Waiting team threads spin for ~10 us after each run (the next step follows within a few
// microseconds when the pipeline keeps up), then sleep on a futex (std::atomic::wait), so an
// idle team costs no CPU. Longer spins cost more than they save on a busy machine: 50 us made
// a batch-32 step on 2 threads 2x slower than 10 us at load 5 on 2 cores.

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
  void Run(absl::FunctionRef<void()> fn);
  // CPU time (the threads' CPU clocks) of the team threads besides the caller, from their start
  // to the end of their latest run: the work and the spinning in between, not the sleeping.
  // Complete for a run once Run has returned.
  int64_t team_cpu_ns() const;
  // Spins, then yields, until done() (for waits inside fn on items other threads claimed).
  static void WaitUntil(absl::FunctionRef<bool()> done);

 private:
  void WorkerLoop(int index);

  const int size_;
  std::vector<std::thread> threads_;
  std::optional<absl::FunctionRef<void()>> fn_;  // valid while open_ (or a joined thread runs)
  std::atomic<uint64_t> generation_{0};          // runs started: team threads wake on a change
  std::atomic<bool> open_{false};                // team threads may join the current run
  std::atomic<int> inside_{0};                   // team threads that joined and have not left
  std::atomic<int> sleepers_{0};                 // threads parked in an atomic wait
  std::atomic<bool> stop_{false};
  std::vector<std::atomic<int64_t>> cpu_ns_;  // per team thread, published after each run
};

}  // namespace sluice::cpu_internal

#endif  // SLUICE_ENGINE_CPU_INTERNAL_WORKER_TEAM_H_
