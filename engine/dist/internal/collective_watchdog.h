// CollectiveWatchdog: a bounded wait for every collective of an MPI job (docs/distributed.md,
// "Watchdog"). A rank that is stopped (SIGSTOP), hung, or gone without MPI noticing would
// otherwise leave every other rank waiting in its next collective forever.
//
// Each process runs one watchdog thread with a communicator of its own (a duplicate of the
// world). A collective is wrapped in a Scope, which records what it is and when it began. When
// a rank has waited longer than the timeout, its watchdog asks every other rank's watchdog what
// it is doing; a rank that answers is inside a collective (or says where it is); a rank that
// does not answer within the grace period is stopped, hung or finished. The lowest-ranked rank
// that waited prints one line naming the ranks that did not arrive and the step, and ends the
// job with MPI_Abort (the others follow after a further grace period, in case it could not).
//
// Thread safety: Enter/Leave may be called from any thread; the watchdog thread alone uses its
// communicator.
#ifndef SLUICE_ENGINE_DIST_INTERNAL_COLLECTIVE_WATCHDOG_H_
#define SLUICE_ENGINE_DIST_INTERNAL_COLLECTIVE_WATCHDOG_H_

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice::dist::dist_internal {

// What a rank waits in; the index travels in the watchdog's replies.
enum class CollectiveKind : int64_t { kAllReduce, kBroadcast, kAllGather, kBarrier, kDuplicate };
const char* CollectiveName(CollectiveKind kind);

class CollectiveWatchdog {
 public:
  // `comm`: a communicator only the watchdog uses (freed by the destructor). Starts the thread.
  CollectiveWatchdog(MPI_Comm comm, int rank, int size);
  // Stops and joins the thread (before MPI_Finalize).
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Marks one collective of this process for as long as it lives: the `call`-th collective
  // (counting from 1) on communicator `comm_index` (0: the world; duplicates are numbered in
  // the order they were made, the same on every rank).
  class Scope {
   public:
    Scope(CollectiveWatchdog* watchdog, CollectiveKind kind, int64_t comm_index, int64_t call);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveWatchdog* watchdog_;
    uint64_t token_;
  };

 private:
  using Clock = std::chrono::steady_clock;
  struct Active {
    uint64_t token;
    CollectiveKind kind;
    int64_t comm_index;
    int64_t call;
    Clock::time_point since;
    int64_t step;
  };
  // What one rank said it was doing.
  struct Answer {
    bool answered = false;
    bool waiting = false;  // inside a collective
    CollectiveKind kind = CollectiveKind::kAllReduce;
    int64_t comm_index = 0;
    int64_t call = 0;
    int64_t step = -1;
  };

  uint64_t Enter(CollectiveKind kind, int64_t comm_index, int64_t call);
  void Leave(uint64_t token);
  bool Oldest(Active* out);
  void Loop();
  void AnswerQueries();
  void WaitAnswering(double seconds, std::vector<Answer>* answers);
  [[noreturn]] void Fire(const Active& mine, double waited_s);

  MPI_Comm comm_;
  const int rank_, size_;
  std::mutex mu_;
  std::vector<Active> active_;             // guarded by mu_
  uint64_t next_token_ = 1;                // guarded by mu_
  std::deque<std::vector<int64_t>> sent_;  // buffers of replies in flight (watchdog thread)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::dist::dist_internal

#endif  // SLUICE_ENGINE_DIST_INTERNAL_COLLECTIVE_WATCHDOG_H_
