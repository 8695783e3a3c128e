// The device side of the ceilings: H2D copy rates through the device layer (the same copy
// stream, pinned memory and timing events the pipeline's upload stage uses) and the compute
// rate of the chosen backend.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/device.h"
#include "device/sim/sim_device.h"
#include "engine/backend_factory.h"
#include "engine/diagnostics/ceilings.h"
#include "engine/diagnostics/internal/ceilings_internal.h"
#include "pipeline/convert.h"
#include "pipeline/stage_stats.h"

namespace sluice::ceilings_internal {
namespace {

// Copies of `bytes` from `src` to `dst` on `stream`, one at a time, until `seconds` have
// passed: the copies made and their summed device-event copy time.
absl::StatusOr<std::pair<uint64_t, int64_t>> CopyFor(device::Device* dev, device::Stream* stream,
                                                     device::Event* start, device::Event* end,
                                                     void* dst, const char* src, size_t bytes,
                                                     double seconds) {
  int64_t copy_ns = 0;
  uint64_t copies = 0;
  const int64_t until = NowNs() + static_cast<int64_t>(seconds * 1e9);
  do {
    RETURN_IF_ERROR(stream->Record(start));
    RETURN_IF_ERROR(stream->CopyToDevice(dst, src, bytes));
    RETURN_IF_ERROR(stream->Record(end));
    RETURN_IF_ERROR(end->Synchronize());
    ASSIGN_OR_RETURN(int64_t ns, end->NanosSince(*start));
    copy_ns += ns;
    ++copies;
  } while (NowNs() < until);
  return std::make_pair(copies, std::max<int64_t>(copy_ns, 1));
}

// Copies one batch until `seconds` have passed; the rate is bytes over the device-event copy
// time (what the pipeline's h2d stage records). Then a quarter of the batch for a quarter of
// the time: a copy's time t(b) = fixed + b / bandwidth, so fixed = (4 t(b/4) - t(b)) / 3, the
// part fewer bytes (u8 batches) would not shrink.
absl::StatusOr<Ceiling> TimeCopies(device::Device* dev, device::Stream* stream, void* dst,
                                   const char* src, size_t bytes, uint32_t batch, double seconds,
                                   const char* memory) {
  ASSIGN_OR_RETURN(std::unique_ptr<device::Event> start, dev->CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(std::unique_ptr<device::Event> end, dev->CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(auto whole,
                   CopyFor(dev, stream, start.get(), end.get(), dst, src, bytes, seconds));
  ASSIGN_OR_RETURN(auto quarter, CopyFor(dev, stream, start.get(), end.get(), dst, src,
                                         std::max<size_t>(1, bytes / 4), seconds / 4));
  const double s = whole.second / 1e9;
  Ceiling c;
  c.measured = true;
  c.mb_per_s = whole.first * double(bytes) / 1e6 / s;
  c.items_per_s = whole.first / s;
  c.samples_per_s = whole.first * double(batch) / s;
  const double t_whole = static_cast<double>(whole.second) / whole.first;
  const double t_quarter = static_cast<double>(quarter.second) / quarter.first;
  c.fixed_us_per_item = std::clamp((4 * t_quarter - t_whole) / 3, 0.0, t_whole) / 1e3;
  c.note = absl::StrCat("async copy of one batch from ", memory,
                        " host memory on a copy stream of ", dev->name(),
                        "; device event time; the fixed part from copies of a quarter batch");
  return c;
}

Ceiling NotMeasured(const absl::Status& why) {
  Ceiling c;
  c.note = absl::StrCat("not measured: ", why.message());
  return c;
}

}  // namespace

// On the simulated device (--device sim) or a CUDA device, a batch is copied from pinned and
// from pageable memory; otherwise both figures stay "not measured: no CUDA device".
void MeasureH2D(const CeilingOptions& options, size_t sample_bytes, size_t label_bytes,
                uint32_t batch, double seconds, Ceiling* pinned, Ceiling* pageable) {
  *pinned = *pageable = Ceiling{};
  const device::DeviceSpec& spec = options.backend.device;
  const bool sim = spec.platform == device::Platform::kSim;
  if (!sim && device::CudaDeviceCount() == 0) {
    pinned->note = pageable->note = "not measured: no CUDA device";
    return;
  }
  // The run's own device: the simulated one with the run's link model, else CUDA.
  const int ordinal = spec.ordinal_or(0);
  absl::StatusOr<std::unique_ptr<device::Device>> dev =
      sim ? device::OpenSimDevice(options.backend.sim.device, ordinal)
          : device::OpenCudaDevice(ordinal);
  if (!dev.ok()) {
    *pinned = *pageable = NotMeasured(dev.status());
    return;
  }
  const size_t bytes = sample_bytes + label_bytes;
  absl::StatusOr<std::unique_ptr<device::Stream>> stream = (*dev)->CreateStream();
  absl::StatusOr<device::Buffer> dst = (*dev)->Allocate(bytes);
  absl::StatusOr<device::Buffer> host = (*dev)->AllocatePinnedHost(bytes);
  for (const absl::Status& s : {stream.status(), dst.status(), host.status()}) {
    if (!s.ok()) {
      *pinned = *pageable = NotMeasured(s);
      return;
    }
  }
  std::memset(host->data(), 0, bytes);
  absl::StatusOr<Ceiling> p =
      TimeCopies(dev->get(), stream->get(), dst->data(), static_cast<const char*>(host->data()),
                 bytes, batch, seconds, "pinned");
  *pinned = p.ok() ? *p : NotMeasured(p.status());
  std::vector<char> pageable_src(bytes, 0);
  absl::StatusOr<Ceiling> q = TimeCopies(dev->get(), stream->get(), dst->data(),
                                         pageable_src.data(), bytes, batch, seconds, "pageable");
  *pageable = q.ok() ? *q : NotMeasured(q.status());
}

// The compute ceiling: train steps of the run's own backend, with the run's options, on the
// dataset's real batches (host memory, in the h2d format), in turn. On a device backend the
// batches are uploaded once and the steps are timed with events on the compute stream (device
// time, no H2D); on the CPU, host time. Three timed rounds, the fastest kept: a ceiling is an
// upper bound, and the run is compared against it.
absl::Status MeasureCompute(const CeilingOptions& options, const std::vector<BatchView>& batches,
                            double seconds, Ceiling* out) {
  *out = Ceiling{};
  if (batches.empty()) return absl::InvalidArgumentError("MeasureCompute: no batches");
  const BatchView& first = batches.front();
  if (options.model.layers.empty() ||
      static_cast<size_t>(options.model.layers.front()) != first.sample.values()) {
    out->note = "not measured: the model's input size differs from the samples'";
    return absl::OkStatus();
  }
  ModelState state = InitModelState(options.model, options.optimizer, /*seed=*/0);
  BackendSpec spec = options.backend;
  spec.options.max_batch = static_cast<int>(first.size);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, CreateBackend(spec, state, options.optimizer));
  std::vector<BatchView> views = batches;
  std::vector<device::Buffer> memory;
  device::Stream* stream = backend->compute_stream();
  std::unique_ptr<device::Event> start, end;
  std::vector<std::unique_ptr<device::Event>> in_flight;  // device backends: steps queued
  if (stream != nullptr) {  // upload once: the ceiling is compute alone
    device::Device* dev = backend->device();
    for (BatchView& v : views) {
      const size_t sample_bytes = size_t{v.size} * v.sample.bytes();
      ASSIGN_OR_RETURN(device::Buffer s, dev->Allocate(sample_bytes));
      ASSIGN_OR_RETURN(device::Buffer l, dev->Allocate(4 * size_t{v.size}));
      RETURN_IF_ERROR(stream->CopyToDevice(s.data(), v.samples, sample_bytes));
      RETURN_IF_ERROR(stream->CopyToDevice(l.data(), v.labels, 4 * size_t{v.size}));
      v.samples = s.data();
      v.labels = static_cast<const int32_t*>(l.data());
      v.on_device = true;
      memory.push_back(std::move(s));
      memory.push_back(std::move(l));
    }
    RETURN_IF_ERROR(stream->Synchronize());
    ASSIGN_OR_RETURN(start, dev->CreateEvent(/*timing=*/true));
    ASSIGN_OR_RETURN(end, dev->CreateEvent(/*timing=*/true));
    for (int i = 0; i < 4; ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<device::Event> e, dev->CreateEvent(/*timing=*/false));
      in_flight.push_back(std::move(e));
    }
  }
  const float lr = options.optimizer.lr;
  for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(backend->TrainStep(views[i % views.size()], lr));
  RETURN_IF_ERROR(backend->Synchronize());
  double best_steps_per_s = 0;
  uint64_t next = 0;
  for (int round = 0; round < 3; ++round) {
    uint64_t steps = 0;
    const int64_t host_start = NowNs();
    const int64_t until = host_start + static_cast<int64_t>(seconds / 3 * 1e9);
    if (stream != nullptr) RETURN_IF_ERROR(stream->Record(start.get()));
    do {
      if (!in_flight.empty()) {
        // A device backend only enqueues: keep a few steps queued (so the device never idles)
        // but no more, or the host would enqueue far more than the round's time of work.
        device::Event* slot = in_flight[steps % in_flight.size()].get();
        if (steps >= in_flight.size()) RETURN_IF_ERROR(slot->Synchronize());
        RETURN_IF_ERROR(backend->TrainStep(views[next++ % views.size()], lr));
        RETURN_IF_ERROR(stream->Record(slot));
      } else {
        RETURN_IF_ERROR(backend->TrainStep(views[next++ % views.size()], lr));
      }
      ++steps;
    } while (NowNs() < until);
    int64_t ns = 0;
    if (stream != nullptr) {
      RETURN_IF_ERROR(stream->Record(end.get()));
      RETURN_IF_ERROR(backend->Synchronize());
      ASSIGN_OR_RETURN(ns, end->NanosSince(*start));
    } else {
      RETURN_IF_ERROR(backend->Synchronize());
      ns = NowNs() - host_start;
    }
    best_steps_per_s = std::max(best_steps_per_s, steps * 1e9 / std::max<int64_t>(ns, 1));
  }
  out->measured = true;
  out->items_per_s = best_steps_per_s;
  out->samples_per_s = best_steps_per_s * first.size;
  out->mb_per_s = out->samples_per_s * first.sample.bytes() / 1e6;
  out->note =
      absl::StrCat("train steps of ", backend->name(), " on ", views.size(), " batches of ",
                   first.size, " real samples of the dataset in turn, ",
                   stream != nullptr ? "device time from compute-stream events" : "host time",
                   "; fastest of 3 rounds");
  return absl::OkStatus();
}

}  // namespace sluice::ceilings_internal
