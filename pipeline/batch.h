// The unit that crosses from the pipeline to the engine: one batch of preprocessed samples.
#ifndef SLUICE_PIPELINE_BATCH_H_
#define SLUICE_PIPELINE_BATCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::device {
class Event;
}  // namespace sluice::device

namespace sluice {

// What crosses PCIe (--h2d-format): raw u8 pixels (normalized later, on the device) or values
// already normalized on the CPU as (x/255 - mean)/std, in f16 or f32.
enum class H2DFormat : uint8_t { kU8 = 0, kF16 = 1, kF32 = 2 };
absl::string_view H2DFormatName(H2DFormat f);  // "u8" | "f16" | "f32"
absl::StatusOr<H2DFormat> ParseH2DFormat(absl::string_view name);
inline constexpr size_t H2DFormatSize(H2DFormat f) {
  return f == H2DFormat::kU8 ? 1 : (f == H2DFormat::kF16 ? 2 : 4);
}

// Normalization applied to u8 samples: y = (x/255 - mean) / std. The defaults (0, 1) give
// exactly torchvision's ToTensor().
struct Normalization {
  float mean = 0.0f;
  float std = 1.0f;
};

// A read-only view of one batch. Samples are row-major [size x features] in `format`; labels
// are int32 class ids. Memory is owned by whoever produced the view (a pinned buffer of the
// pipeline, a device slot, or a test's vector) and stays valid until that owner releases it.
struct BatchView {
  const void* samples = nullptr;
  const int32_t* labels = nullptr;
  H2DFormat format = H2DFormat::kF32;
  uint32_t size = 0;       // samples in this batch (the last one of an epoch may be short;
                           // 0 on a data-parallel rank whose slice of the step is empty)
  uint32_t features = 0;   // values per sample (784 for MNIST)
  bool on_device = false;  // true when samples/labels point to device memory
  // For device batches: the event the compute stream must wait on (device::Stream::Wait)
  // before reading the batch; null when the data is ready. Owned by the batch's producer.
  device::Event* ready_event = nullptr;
  // Position in the run.
  uint64_t epoch = 0;
  uint64_t step = 0;  // global step within the epoch (the same on every rank)
  // Samples planned for this step's global batch over all ranks, before corrupt-frame skips;
  // equals `size` with one rank and nothing skipped.
  uint32_t global_size = 0;
  // Host memory, even for device batches: the split-wide record id of each of the `size`
  // samples, in batch order (skipped samples removed). Valid while the batch is.
  const uint32_t* record_ids = nullptr;
  // Device batches: the copy's device time on the host clock (steady-clock ns), for the share
  // of copy time hidden behind compute; 0, 0 for host batches.
  int64_t copy_start_ns = 0;
  int64_t copy_end_ns = 0;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_BATCH_H_
