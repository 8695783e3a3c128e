#include "engine/cpu/internal/worker_team.h"

#include <immintrin.h>

#include <chrono>

#include "common/clock.h"

namespace sluice::cpu_internal {
namespace {

// How long a waiting thread spins before it sleeps (or, in WaitUntil, yields). Long enough to
// cover the gap between two steps when the next batch is ready; short enough that a spinning
// thread does not take the core from the pipeline or from a teammate that holds work.
constexpr int64_t kSpinNs = 10'000;

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

WorkerTeam::WorkerTeam(int size) : size_(size < 1 ? 1 : size), cpu_ns_(size_ - 1) {
  threads_.reserve(size_ - 1);
  for (int t = 1; t < size_; ++t) threads_.emplace_back([this, t] { WorkerLoop(t - 1); });
}

int64_t WorkerTeam::team_cpu_ns() const {
  int64_t sum = 0;
  for (const std::atomic<int64_t>& ns : cpu_ns_) sum += ns.load(std::memory_order_relaxed);
  return sum;
}

WorkerTeam::~WorkerTeam() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerTeam::Run(absl::FunctionRef<void()> fn) {
  if (size_ == 1) {
    fn();
    return;
  }
  fn_.emplace(fn);
  open_.store(true, std::memory_order_seq_cst);         // publishes fn_
  generation_.fetch_add(1, std::memory_order_seq_cst);  // wakes the team
  Notify(generation_, sleepers_);
  fn();
  // Close the run, then wait for the threads inside. seq_cst on open_ and inside_ (here: store
  // open_, load inside_; a team thread: increment inside_, load open_): a thread that joins
  // after this load sees the run closed and never touches fn_.
  open_.store(false, std::memory_order_seq_cst);
  SpinThenWait(inside_, sleepers_, [this] { return inside_.load(std::memory_order_seq_cst) == 0; });
  fn_.reset();
}

void WorkerTeam::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    SpinThenWait(generation_, sleepers_,
                 [&] { return generation_.load(std::memory_order_acquire) != seen; });
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_seq_cst)) return;
    inside_.fetch_add(1, std::memory_order_seq_cst);
    if (open_.load(std::memory_order_seq_cst)) (*fn_)();
    // Before leaving the run, so that Run's return publishes it (inside_ is seq_cst).
    cpu_ns_[index].store(ThreadCpuNs(), std::memory_order_relaxed);
    if (inside_.fetch_sub(1, std::memory_order_seq_cst) == 1) Notify(inside_, sleepers_);
  }
}

void WorkerTeam::WaitUntil(absl::FunctionRef<bool()> done) {
  const int64_t deadline = NowNs() + kSpinNs;
  while (!done()) {
    if (NowNs() < deadline) {
      _mm_pause();
    } else {
      std::this_thread::yield();  // the thread being waited for may need this core
    }
  }
}

}  // namespace sluice::cpu_internal
