// The simulated-device backend (--device sim): the CPU backend's kernels, run in stream order on
// the compute stream of a simulated device (device/sim/sim_device.h), each step taking at least
// its modelled compute time. Everything above it (the pipeline's upload into device slots, the
// ready-event waits, the releases with the compute stream, event timing) is the code a GPU run
// executes; only the lowest layer differs. The same kernels in the same order as the CPU
// backend, so a sim run ends bitwise equal to a CPU run.
#include "engine/sim/sim_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/sim/sim_device.h"

namespace sluice {
namespace {

// The host's part of a modelled launch: a busy wait, as the CPU time of a real launch.
void SpinNs(int64_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

class SimBackend final : public Backend {
 public:
  SimBackend(std::unique_ptr<Backend> cpu, std::unique_ptr<device::Device> device,
             std::unique_ptr<device::Stream> stream, const BackendOptions& options,
             const SimBackendOptions& sim, std::string name)
      : cpu_(std::move(cpu)),
        device_(std::move(device)),
        stream_(std::move(stream)),
        options_(options),
        sim_(sim),
        name_(std::move(name)) {}
  ~SimBackend() override { (void)stream_->Synchronize(); }

  absl::Status Init(size_t max_sample_bytes, size_t max_label_bytes) {
    ASSIGN_OR_RETURN(staging_samples_, device_->Allocate(max_sample_bytes));
    ASSIGN_OR_RETURN(staging_labels_, device_->Allocate(max_label_bytes));
    return absl::OkStatus();
  }

  std::string name() const override { return name_; }
  device::Platform platform() const override { return device::Platform::kSim; }
  device::Device* device() const override { return device_.get(); }
  device::Stream* compute_stream() const override { return stream_.get(); }

  absl::Status TrainStep(const BatchView& batch, float lr) override {
    RETURN_IF_ERROR(FirstError());
    ASSIGN_OR_RETURN(BatchView v, Stage(batch));
    // The launches before the last are empty and take no modelled time (a sleep that short
    // would last the host scheduler's ~60 us instead); the last holds the step's kernels and
    // its whole modelled time.
    const int launches = std::max(1, sim_.launches_per_step);
    for (int i = 0; i + 1 < launches; ++i) {
      if (sim_.launch_host_ns > 0) SpinNs(sim_.launch_host_ns);
      RETURN_IF_ERROR(device::SimLaunch(
          stream_.get(), [] {}, 0));
    }
    if (sim_.launch_host_ns > 0) SpinNs(sim_.launch_host_ns);
    return device::SimLaunch(
        stream_.get(),
        [this, v, lr] {
          // The CPU kernels read the slot in place: sim device memory is host memory.
          BatchView host = v;
          host.on_device = false;
          host.ready_event = nullptr;
          Keep(cpu_->TrainStep(host, lr));
        },
        ModelledNs(batch.size));
  }

  absl::StatusOr<LossStats> TakeLoss() override {
    RETURN_IF_ERROR(Synchronize());
    return cpu_->TakeLoss();
  }

  absl::Status Evaluate(const BatchView& batch, EvalStats* stats) override {
    RETURN_IF_ERROR(FirstError());
    ASSIGN_OR_RETURN(BatchView v, Stage(batch));
    RETURN_IF_ERROR(device::SimLaunch(
        stream_.get(),
        [this, v, stats] {
          BatchView host = v;
          host.on_device = false;
          host.ready_event = nullptr;
          Keep(cpu_->Evaluate(host, stats));
        },
        ModelledNs(batch.size) / 3));  // forward only: about a third of a training step
    return Synchronize();              // `stats` is read by the caller on return
  }

  absl::Status Synchronize() override {
    RETURN_IF_ERROR(stream_->Synchronize());
    return FirstError();
  }
  absl::StatusOr<ModelState> SaveState() override {
    RETURN_IF_ERROR(Synchronize());
    return cpu_->SaveState();
  }
  absl::Status LoadState(const ModelState& state) override {
    RETURN_IF_ERROR(Synchronize());
    return cpu_->LoadState(state);
  }
  MemoryReport memory() const override { return cpu_->memory(); }
  // Written by the steps on the compute stream: read after Synchronize().
  ExchangeStats exchange() const override { return cpu_->exchange(); }

 private:
  // A device batch is read in place after the compute stream waited for its ready event. A
  // host batch may be reused when TrainStep returns, so it is copied into the staging slot
  // first, on the compute stream (as a device backend would).
  absl::StatusOr<BatchView> Stage(const BatchView& batch) {
    BatchView v = batch;
    if (batch.ready_event != nullptr) RETURN_IF_ERROR(stream_->Wait(batch.ready_event));
    if (batch.on_device) return v;
    const size_t sample_bytes = size_t{batch.size} * batch.sample.bytes();
    const size_t label_bytes = sizeof(int32_t) * batch.size;
    if (sample_bytes > staging_samples_.size() || label_bytes > staging_labels_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", batch.size, " samples exceeds max_batch ", options_.max_batch));
    }
    // Synchronously, like a copy from pageable memory: the caller may reuse its buffer after.
    RETURN_IF_ERROR(stream_->CopyToDevice(staging_samples_.data(), batch.samples, sample_bytes));
    RETURN_IF_ERROR(stream_->CopyToDevice(staging_labels_.data(), batch.labels, label_bytes));
    RETURN_IF_ERROR(stream_->Synchronize());
    v.samples = staging_samples_.data();
    v.labels = static_cast<const int32_t*>(staging_labels_.data());
    v.on_device = true;
    v.ready_event = nullptr;
    return v;
  }

  int64_t ModelledNs(uint32_t samples) const {
    int64_t ns = sim_.compute_ns_per_step;
    if (sim_.compute_samples_per_s > 0) {
      ns = std::max(ns, static_cast<int64_t>(samples * 1e9 / sim_.compute_samples_per_s));
    }
    return ns;
  }

  // Errors of work that ran on the stream: the first one is returned by the next call.
  void Keep(absl::Status s) {
    if (s.ok()) return;
    std::lock_guard<std::mutex> l(mu_);
    if (error_.ok()) error_ = std::move(s);
  }
  absl::Status FirstError() {
    std::lock_guard<std::mutex> l(mu_);
    return error_;
  }

  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<device::Device> device_;
  std::unique_ptr<device::Stream> stream_;  // destroyed before device_
  BackendOptions options_;
  SimBackendOptions sim_;
  std::string name_;
  device::Buffer staging_samples_;
  device::Buffer staging_labels_;
  std::mutex mu_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const ModelState& state,
                                                          const OptimizerConfig& opt,
                                                          const BackendOptions& options,
                                                          const SimBackendOptions& sim,
                                                          const CpuBackendOptions& cpu_options) {
  if (sim.compute_ns_per_step < 0 || !(sim.compute_samples_per_s >= 0)) {
    return absl::InvalidArgumentError("sim compute time and rate must be >= 0");
  }
  if (sim.launches_per_step < 1 || sim.launch_host_ns < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim launches per step must be >= 1 and their host cost >= 0 ns, got ",
                     sim.launches_per_step, " and ", sim.launch_host_ns));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu,
                   CreateCpuBackend(state, opt, options, cpu_options));
  ASSIGN_OR_RETURN(std::unique_ptr<device::Device> dev,
                   device::OpenSimDevice(sim.device, sim.ordinal));
  ASSIGN_OR_RETURN(std::unique_ptr<device::Stream> stream, dev->CreateStream());
  const std::string name = absl::StrCat(dev->name(), ", compute: ", cpu->name());
  const size_t features = static_cast<size_t>(state.model.layers.front());
  auto backend = std::make_unique<SimBackend>(std::move(cpu), std::move(dev), std::move(stream),
                                              options, sim, name);
  RETURN_IF_ERROR(backend->Init(size_t{static_cast<size_t>(options.max_batch)} * features * 4,
                                sizeof(int32_t) * static_cast<size_t>(options.max_batch)));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace sluice
