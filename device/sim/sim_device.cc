// device/device.h in host memory: one thread per stream, copies timed by a link model, events
// with CUDA's ordering. See sim_device.h for the model.
#include "device/sim/sim_device.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sluice::device {
namespace {

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SleepUntilNs(int64_t t) {
  std::this_thread::sleep_until(std::chrono::steady_clock::time_point(std::chrono::nanoseconds(t)));
}

// The flags that end modelled waits (SimOptions::skip_modelled_time and _too).
struct SkipFlags {
  const std::atomic<bool>* a = nullptr;
  const std::atomic<bool>* b = nullptr;
  explicit SkipFlags(const SimOptions& o) : a(o.skip_modelled_time), b(o.skip_modelled_time_too) {}
  bool none() const { return a == nullptr && b == nullptr; }
  bool set() const {
    return (a != nullptr && a->load(std::memory_order_relaxed)) ||
           (b != nullptr && b->load(std::memory_order_relaxed));
  }
};

// A modelled wait: until `t`, or until a skip flag becomes true (checked every kStopPollNs).
void ModelledWaitUntilNs(int64_t t, const SkipFlags& skip) {
  if (skip.none()) return SleepUntilNs(t);
  for (int64_t now = SteadyNs(); now < t; now = SteadyNs()) {
    if (skip.set()) return;
    SleepUntilNs(std::min(t, now + kStopPollNs));
  }
}

constexpr size_t kAlign = 4096;

class SimEvent final : public Event {
 public:
  explicit SimEvent(bool timing) : timing_(timing) {}

  // At enqueue time: the sequence number this record will complete.
  uint64_t NextRecord() {
    std::lock_guard<std::mutex> l(mu_);
    return ++recorded_;
  }
  // At enqueue time: the record a Wait enqueued now must wait for.
  uint64_t LatestRecord() const {
    std::lock_guard<std::mutex> l(mu_);
    return recorded_;
  }
  // On the recording stream's thread.
  void Complete(uint64_t seq) {
    std::lock_guard<std::mutex> l(mu_);
    if (seq > completed_) {
      completed_ = seq;
      completed_ns_ = SteadyNs();
    }
    cv_.notify_all();
  }
  void WaitFor(uint64_t seq) const {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return completed_ >= seq; });
  }

  absl::Status Synchronize() override {
    WaitFor(LatestRecord());
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> NanosSince(const Event& start) const override {
    const auto& s = static_cast<const SimEvent&>(start);
    if (!timing_ || !s.timing_) {
      return absl::FailedPreconditionError("NanosSince: both events need timing");
    }
    ASSIGN_OR_RETURN(const int64_t end_ns, HostNanos());
    ASSIGN_OR_RETURN(const int64_t start_ns, s.HostNanos());
    return end_ns - start_ns;
  }
  absl::StatusOr<int64_t> HostNanos() const override {
    std::lock_guard<std::mutex> l(mu_);
    if (!timing_) return absl::FailedPreconditionError("HostNanos: the event has no timing");
    if (recorded_ == 0 || completed_ < recorded_) {
      return absl::FailedPreconditionError("HostNanos: the event's last record has not completed");
    }
    return completed_ns_;
  }

 private:
  const bool timing_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t recorded_ = 0;   // records enqueued
  uint64_t completed_ = 0;  // highest record completed
  int64_t completed_ns_ = 0;
};

class SimStream final : public Stream {
 public:
  // `callback_mu`: the device's, held while a callback runs (see AddCallback).
  SimStream(const SimOptions& options, uint64_t jitter_seed, std::mutex* callback_mu)
      : options_(options),
        callback_mu_(callback_mu),
        rng_(jitter_seed),
        worker_([this] { Run(); }) {}
  ~SimStream() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    return Copy(dst, src, bytes);
  }
  absl::Status Record(Event* event) override {
    auto* e = static_cast<SimEvent*>(event);
    const uint64_t seq = e->NextRecord();
    Enqueue([e, seq] { e->Complete(seq); });
    return absl::OkStatus();
  }
  absl::Status Wait(Event* event) override {
    auto* e = static_cast<SimEvent*>(event);
    const uint64_t seq = e->LatestRecord();
    if (seq != 0) Enqueue([e, seq] { e->WaitFor(seq); });
    return absl::OkStatus();
  }
  // CUDA may run the host functions of all streams one at a time; the sim always does (one
  // device-wide lock), so a callback that holds its thread delays the other streams' callbacks
  // here as it can on a GPU.
  absl::Status AddCallback(std::function<void()> fn) override {
    std::mutex* mu = callback_mu_;
    Enqueue([mu, fn = std::move(fn)] {
      std::lock_guard<std::mutex> l(*mu);
      fn();
    });
    return absl::OkStatus();
  }
  absl::Status Delay(int64_t us) override {
    const SkipFlags skip(options_);
    Enqueue([us, skip] { ModelledWaitUntilNs(SteadyNs() + us * 1000, skip); });
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    std::unique_lock<std::mutex> l(mu_);
    const uint64_t target = enqueued_;
    idle_cv_.wait(l, [&] { return done_ >= target; });
    return absl::OkStatus();
  }

  void Launch(std::function<void()> work, int64_t min_ns) {
    const SkipFlags skip(options_);
    Enqueue([work = std::move(work), min_ns, skip] {
      const int64_t start = SteadyNs();
      work();
      if (min_ns > 0) ModelledWaitUntilNs(start + min_ns, skip);
    });
  }

 private:
  absl::Status Copy(void* dst, const void* src, size_t bytes) {
    const SimOptions o = options_;
    Enqueue([dst, src, bytes, o] {
      const int64_t start = SteadyNs();
      const double link_ns = o.link_bytes_per_s > 0 ? bytes * 1e9 / o.link_bytes_per_s : 0;
      // An empty copy (a data-parallel rank's empty slice) may pass null pointers.
      if (o.poison && bytes > 0) std::memset(dst, 0xFF, bytes);
      ModelledWaitUntilNs(start + o.link_latency_ns + static_cast<int64_t>(link_ns), SkipFlags(o));
      if (bytes > 0) std::memcpy(dst, src, bytes);
    });
    return absl::OkStatus();
  }

  void Enqueue(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> l(mu_);
      ops_.push_back(std::move(op));
      ++enqueued_;
    }
    cv_.notify_one();
  }

  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return stopping_ || !ops_.empty(); });
      if (ops_.empty()) return;  // stopping, and everything enqueued has run
      std::function<void()> op = std::move(ops_.front());
      ops_.pop_front();
      l.unlock();
      if (options_.jitter_seed != 0 && options_.jitter_max_ns > 0) {
        std::uniform_int_distribution<int64_t> d(0, options_.jitter_max_ns);
        std::this_thread::sleep_for(std::chrono::nanoseconds(d(rng_)));
      }
      op();
      l.lock();
      ++done_;
      idle_cv_.notify_all();
    }
  }

  const SimOptions options_;
  std::mutex* const callback_mu_;
  std::mt19937_64 rng_;  // the worker's only
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> ops_;
  uint64_t enqueued_ = 0;
  uint64_t done_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after every other member exists
};

class SimDevice final : public Device {
 public:
  SimDevice(const SimOptions& options, int ordinal) : options_(options), ordinal_(ordinal) {}
  std::string name() const override {
    return absl::StrCat("sim:", ordinal_, " (simulated, link ", options_.link_bytes_per_s / 1e9,
                        " GB/s)");
  }
  Platform platform() const override { return Platform::kSim; }
  int ordinal() const override { return ordinal_; }

  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    std::lock_guard<std::mutex> l(mu_);
    // Each stream gets its own jitter sequence, derived from the seed.
    const uint64_t seed = options_.jitter_seed == 0 ? 0 : options_.jitter_seed + 7919 * ++streams_;
    return std::unique_ptr<Stream>(std::make_unique<SimStream>(options_, seed, &callback_mu_));
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent(bool timing) override {
    return std::unique_ptr<Event>(std::make_unique<SimEvent>(timing));
  }
  absl::StatusOr<Buffer> Allocate(size_t bytes) override {
    return HostAllocation(Buffer::Kind::kDevice, bytes);
  }
  absl::StatusOr<Buffer> AllocatePinnedHost(size_t bytes) override {
    return HostAllocation(Buffer::Kind::kPinnedHost, bytes);
  }

 private:
  absl::StatusOr<Buffer> HostAllocation(Buffer::Kind kind, size_t bytes) {
    const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sim device: allocating ", bytes, " bytes failed"));
    }
    return MakeBuffer(kind, p, bytes);
  }
  void Free(Buffer::Kind, void* data) override { std::free(data); }

  const SimOptions options_;
  const int ordinal_;
  std::mutex mu_;
  uint64_t streams_ = 0;
  std::mutex callback_mu_;  // held while any stream's callback runs
};

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> OpenSimDevice(const SimOptions& options, int ordinal) {
  if (!(options.link_bytes_per_s >= 0) || options.link_latency_ns < 0 ||
      options.jitter_max_ns < 0) {
    return absl::InvalidArgumentError(
        "sim device: link bandwidth, latency and jitter must be >= 0");
  }
  return std::unique_ptr<Device>(std::make_unique<SimDevice>(options, ordinal));
}

absl::Status SimLaunch(Stream* stream, std::function<void()> work, int64_t min_ns) {
  auto* s = dynamic_cast<SimStream*>(stream);
  if (s == nullptr) return absl::InvalidArgumentError("SimLaunch: not a simulated stream");
  s->Launch(std::move(work), min_ns);
  return absl::OkStatus();
}

bool IsSimDevice(const Device* device) { return dynamic_cast<const SimDevice*>(device) != nullptr; }

}  // namespace sluice::device
