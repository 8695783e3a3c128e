#include "engine/cpu/internal/worker_team.h"

#include <immintrin.h>

#include <chrono>

namespace sluice::cpu_internal {
namespace {

// How long a waiting thread spins before it sleeps. Long enough to cover the gap between two
// steps (the trainer fetching the next batch) and the imbalance between slices; short enough
// that a team left idle gives its cores back to the pipeline within a fraction of a step.
constexpr int64_t kSpinNs = 50'000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Returns once done() is true. `value` is the atomic whose change may make it true; whoever
// changes it calls Notify afterwards.
template <typename T, typename Done>
void SpinThenWait(std::atomic<T>& value, std::atomic<int>& sleepers, Done done) {
  const int64_t deadline = NowNs() + kSpinNs;
  for (int i = 1; !done(); ++i) {
    _mm_pause();
    if (i % 64 == 0 && NowNs() > deadline) {
      // seq_cst on both sides (here: sleepers then value; Notify: value then sleepers), so
      // either the notifier sees this sleeper or this thread sees the new value.
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      for (T v = value.load(std::memory_order_seq_cst); !done();
           v = value.load(std::memory_order_seq_cst)) {
        value.wait(v, std::memory_order_seq_cst);
      }
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
  }
}

template <typename T>
void Notify(std::atomic<T>& value, const std::atomic<int>& sleepers) {
  if (sleepers.load(std::memory_order_seq_cst) > 0) value.notify_all();
}

}  // namespace

WorkerTeam::WorkerTeam(int size) : size_(size < 1 ? 1 : size) {
  threads_.reserve(size_ - 1);
  for (int t = 1; t < size_; ++t) threads_.emplace_back([this, t] { WorkerLoop(t); });
}

WorkerTeam::~WorkerTeam() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerTeam::Run(absl::FunctionRef<void(int)> fn) {
  if (size_ == 1) {
    fn(0);
    return;
  }
  fn_.emplace(fn);
  pending_.store(size_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes fn_ and pending_
  Notify(generation_, sleepers_);
  fn(0);
  SpinThenWait(pending_, sleepers_,
               [this] { return pending_.load(std::memory_order_acquire) == 0; });
  fn_.reset();
}

void WorkerTeam::WorkerLoop(int t) {
  uint64_t seen = 0;
  for (;;) {
    SpinThenWait(generation_, sleepers_,
                 [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_relaxed)) return;
    (*fn_)(t);
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1) Notify(pending_, sleepers_);
  }
}

void WorkerTeam::Barrier() {
  if (size_ == 1) return;
  const uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
  if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
    barrier_count_.store(0, std::memory_order_relaxed);
    barrier_phase_.fetch_add(1, std::memory_order_seq_cst);
    Notify(barrier_phase_, sleepers_);
    return;
  }
  SpinThenWait(barrier_phase_, sleepers_,
               [&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
}

}  // namespace sluice::cpu_internal
