// The device side of the ceilings: H2D copy rates through the device layer (the same copy
// stream, pinned memory and timing events the pipeline's upload stage uses) and the compute
// rate of the chosen backend.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "device/device.h"
#include "engine/diagnostics/ceilings.h"
#include "pipeline/convert.h"
#include "pipeline/stage_stats.h"

namespace sluice::ceilings_internal {
namespace {

// Copies one batch from `src` to `dst` on `stream` until `seconds` have passed; the rate is
// bytes over the device-event copy time (what the pipeline's h2d stage records).
absl::StatusOr<Ceiling> TimeCopies(device::Device* dev, device::Stream* stream, void* dst,
                                   const char* src, size_t bytes, uint32_t batch, double seconds,
                                   const char* memory) {
  ASSIGN_OR_RETURN(std::unique_ptr<device::Event> start, dev->CreateEvent(/*timing=*/true));
  ASSIGN_OR_RETURN(std::unique_ptr<device::Event> end, dev->CreateEvent(/*timing=*/true));
  int64_t copy_ns = 0;
  uint64_t copies = 0;
  const int64_t until = NowNs() + static_cast<int64_t>(seconds * 1e9);
  do {
    RETURN_IF_ERROR(stream->Record(start.get()));
    RETURN_IF_ERROR(stream->CopyToDevice(dst, src, bytes));
    RETURN_IF_ERROR(stream->Record(end.get()));
    RETURN_IF_ERROR(end->Synchronize());
    ASSIGN_OR_RETURN(int64_t ns, end->NanosSince(*start));
    copy_ns += ns;
    ++copies;
  } while (NowNs() < until);
  const double s = std::max<int64_t>(copy_ns, 1) / 1e9;
  Ceiling c;
  c.measured = true;
  c.mb_per_s = copies * double(bytes) / 1e6 / s;
  c.items_per_s = copies / s;
  c.samples_per_s = copies * double(batch) / s;
  c.note = absl::StrCat("async copy of one batch from ", memory, " host memory on a copy stream of ",
                        dev->name(), "; device event time");
  return c;
}

Ceiling NotMeasured(const absl::Status& why) {
  Ceiling c;
  c.note = absl::StrCat("not measured: ", why.message());
  return c;
}

}  // namespace

// Without a CUDA device both figures stay "not measured: <why>". With one, a batch is copied
// from pinned and from pageable memory.
void MeasureH2D(size_t sample_bytes, size_t label_bytes, uint32_t batch, int ordinal,
                double seconds, Ceiling* pinned, Ceiling* pageable) {
  *pinned = *pageable = Ceiling{};
  if (device::CudaDeviceCount() == 0) {
    pinned->note = pageable->note = "not measured: no CUDA device";
    return;
  }
  absl::StatusOr<std::unique_ptr<device::Device>> dev = device::OpenCudaDevice(ordinal);
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
  absl::StatusOr<Ceiling> p = TimeCopies(dev->get(), stream->get(), dst->data(),
                                         static_cast<const char*>(host->data()), bytes, batch,
                                         seconds, "pinned");
  *pinned = p.ok() ? *p : NotMeasured(p.status());
  std::vector<char> pageable_src(bytes, 0);
  absl::StatusOr<Ceiling> q = TimeCopies(dev->get(), stream->get(), dst->data(),
                                         pageable_src.data(), bytes, batch, seconds, "pageable");
  *pageable = q.ok() ? *q : NotMeasured(q.status());
}

absl::Status MeasureCompute(const CeilingOptions& options, uint32_t features, double seconds,
                            Ceiling* out) {
  *out = Ceiling{};
  if (options.model.layers.empty() || options.model.layers.front() != static_cast<int>(features)) {
    out->note = "not measured: the model's input size differs from the samples'";
    return absl::OkStatus();
  }
  const uint32_t batch = options.batch_size;
  ModelState state = InitModelState(options.model, options.optimizer, /*seed=*/0);
  BackendOptions bo = options.backend;
  bo.max_batch = static_cast<int>(batch);
  bo.normalization = options.normalization;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(options.device, state, options.optimizer, bo));

  // A synthetic host batch in the h2d format: a ramp of pixel values and cycling labels.
  const size_t values = size_t{batch} * features;
  std::vector<char> samples(values * H2DFormatSize(options.h2d_format));
  for (size_t i = 0; i < values; ++i) {
    const uint8_t px = static_cast<uint8_t>((i * 37) % 256);
    const float f = NormalizeU8(px, options.normalization);
    switch (options.h2d_format) {
      case H2DFormat::kU8: samples[i] = static_cast<char>(px); break;
      case H2DFormat::kF16: {
        const uint16_t h = FloatToHalf(f);
        std::memcpy(samples.data() + 2 * i, &h, 2);
        break;
      }
      case H2DFormat::kF32: std::memcpy(samples.data() + 4 * i, &f, 4); break;
    }
  }
  std::vector<int32_t> labels(batch);
  for (uint32_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % options.model.layers.back());
  BatchView v;
  v.samples = samples.data();
  v.labels = labels.data();
  v.format = options.h2d_format;
  v.size = batch;
  v.features = features;

  const float lr = options.optimizer.lr;
  for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(backend->TrainStep(v, lr));  // warm-up
  RETURN_IF_ERROR(backend->Synchronize());
  uint64_t steps = 0;
  const int64_t start = NowNs();
  const int64_t until = start + static_cast<int64_t>(seconds * 1e9);
  do {
    RETURN_IF_ERROR(backend->TrainStep(v, lr));
    ++steps;
  } while (NowNs() < until);
  RETURN_IF_ERROR(backend->Synchronize());
  const double s = std::max<int64_t>(NowNs() - start, 1) / 1e9;
  out->measured = true;
  out->items_per_s = steps / s;
  out->samples_per_s = steps * double(batch) / s;
  out->mb_per_s = out->samples_per_s * features * H2DFormatSize(options.h2d_format) / 1e6;
  out->note = absl::StrCat("train steps of ", backend->name(), " on a synthetic host batch of ",
                           batch, backend->is_cuda() ? " (includes the backend's staging copy)"
                                                     : "");
  return absl::OkStatus();
}

}  // namespace sluice::ceilings_internal
