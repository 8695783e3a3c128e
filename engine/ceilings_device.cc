// The device side of the ceilings: H2D copy rates (CUDA only, through the pipeline's
// DeviceUploader, so no .cu code lives here) and the compute rate of the chosen backend.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/ceilings.h"
#include "pipeline/internal/convert.h"
#include "pipeline/internal/device_uploader.h"
#include "pipeline/pinned_buffer_pool.h"
#include "pipeline/stage_stats.h"

namespace sluice::ceilings_internal {
namespace {

constexpr char kNoDevice[] = "not measured: no CUDA device";

// Copies one batch from `src` to a device slot until `seconds` have passed; the rate is bytes
// over the CUDA-event copy time (what the pipeline's h2d stage records).
Ceiling TimeCopies(pipeline_internal::DeviceUploader* up, const char* src, size_t sample_bytes,
                   size_t label_bytes, uint32_t batch, double seconds, const char* memory) {
  Ceiling c;
  int64_t copy_ns = 0;
  uint64_t copies = 0;
  const int64_t until = NowNs() + static_cast<int64_t>(seconds * 1e9);
  do {
    std::atomic<bool> done{false};
    absl::Status s = up->Enqueue(0, src, sample_bytes,
                                 reinterpret_cast<const int32_t*>(src + sample_bytes), label_bytes,
                                 /*skip_copy=*/false, [&done] { done.store(true); });
    if (!s.ok()) {
      c.note = absl::StrCat("not measured: ", s.message());
      return c;
    }
    while (!done.load()) std::this_thread::yield();
    absl::StatusOr<int64_t> ns = up->CopyNs(0);
    if (!ns.ok()) {
      c.note = absl::StrCat("not measured: ", ns.status().message());
      return c;
    }
    copy_ns += *ns;
    ++copies;
  } while (NowNs() < until);
  const double s = std::max<int64_t>(copy_ns, 1) / 1e9;
  c.measured = true;
  c.mb_per_s = copies * double(sample_bytes + label_bytes) / 1e6 / s;
  c.items_per_s = copies / s;
  c.samples_per_s = copies * double(batch) / s;
  c.note = absl::StrCat("cudaMemcpyAsync of one batch from ", memory,
                        " host memory on the pipeline's copy stream; CUDA event time");
  return c;
}

}  // namespace

// HOOK (H2D ceilings): without a CUDA device both figures stay "not measured: no CUDA
// device". With one, the pipeline's DeviceUploader copies a batch from pinned and from
// pageable memory.
void MeasureH2D(size_t sample_bytes, size_t label_bytes, uint32_t batch, int device,
                double seconds, Ceiling* pinned, Ceiling* pageable) {
  *pinned = Ceiling{};
  *pageable = Ceiling{};
  if (!pipeline_internal::CudaDeviceAvailable()) {
    pinned->note = pageable->note = kNoDevice;
    return;
  }
  auto up = pipeline_internal::DeviceUploader::Create(device, 1, sample_bytes, label_bytes);
  if (!up.ok()) {
    pinned->note = pageable->note = absl::StrCat("not measured: ", up.status().message());
    return;
  }
  const size_t bytes = sample_bytes + label_bytes;
  auto pool = PinnedBufferPool::Create(1, bytes, PinnedBufferPool::Memory::kPinned);
  if (pool.ok()) {
    PinnedBuffer buf = (*pool)->Acquire();
    std::memset(buf.data(), 0, bytes);
    *pinned = TimeCopies(up->get(), buf.data(), sample_bytes, label_bytes, batch, seconds,
                         "pinned");
  } else {
    pinned->note = absl::StrCat("not measured: ", pool.status().message());
  }
  std::vector<char> host(bytes, 0);
  *pageable = TimeCopies(up->get(), host.data(), sample_bytes, label_bytes, batch, seconds,
                         "pageable");
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
    const float f = pipeline_internal::NormalizeU8(px, options.normalization);
    switch (options.h2d_format) {
      case H2DFormat::kU8: samples[i] = static_cast<char>(px); break;
      case H2DFormat::kF16: {
        const uint16_t h = pipeline_internal::FloatToHalf(f);
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
