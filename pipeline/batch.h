// The unit that crosses from the pipeline to the engine: one batch of preprocessed samples.
#ifndef SLUICE_PIPELINE_BATCH_H_
#define SLUICE_PIPELINE_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"

namespace sluice::device {
class Event;
}  // namespace sluice::device

namespace sluice {

// What crosses PCIe (--h2d-format): raw u8 pixels (normalized later, on the device) or values
// already normalized on the CPU as (x/255 - mean)/std, in f16 or f32. It is the batch's element
// type (BatchView::sample.dtype): one type, so the two can never disagree. bf16 is not an h2d
// format (ParseH2DFormat refuses it).
using H2DFormat = ElementType;
absl::string_view H2DFormatName(H2DFormat f);  // "u8" | "f16" | "f32"
absl::StatusOr<H2DFormat> ParseH2DFormat(absl::string_view name);
inline constexpr size_t H2DFormatSize(H2DFormat f) { return ElementSize(f); }

// Per-channel normalization of u8 samples: y = (x/255 - mean[c]) / std[c] for a value of
// channel c (f32 samples: (x - mean[c]) / std[c]). `mean` and `std` each hold one value (for
// every channel) or one per channel. The defaults (0, 1) give exactly torchvision's ToTensor().
struct Normalization {
  std::vector<float> mean = {0.0f};
  std::vector<float> std = {1.0f};

  float mean_of(size_t channel) const { return mean.size() == 1 ? mean[0] : mean[channel]; }
  float std_of(size_t channel) const { return std.size() == 1 ? std[0] : std[channel]; }
  // mean 0 and std 1 for every channel.
  bool is_identity() const;
  bool operator==(const Normalization&) const = default;
};
// kInvalidArgument unless mean and std each hold 1 or `channels` values, all finite, no std 0;
// the message names the channel count.
absl::Status CheckNormalization(const Normalization& n, uint32_t channels);

// A read-only view of one batch. Samples are [size, C, H, W] (channels first, contiguous) as
// `sample` declares; labels are int32 class ids. Memory is owned by whoever produced the view (a
// pinned buffer of the pipeline, a device slot, or a test's vector) and stays valid until that
// owner releases it.
struct BatchView {
  const void* samples = nullptr;
  const int32_t* labels = nullptr;
  // One sample's spec: layout always CHW, dtype the batch's element type (its h2d format).
  SampleSpec sample;
  // The normalization the consumer still has to apply (u8 batches: on the device, per channel
  // of `sample`); null when nothing remains (f16/f32 batches come normalized) or for the
  // identity ToTensor (x/255) on u8. Owned by the batch's producer, valid while the batch is.
  const Normalization* normalization = nullptr;
  uint32_t size = 0;       // samples in this batch (the last one of an epoch may be short;
                           // 0 on a data-parallel rank whose slice of the step is empty)
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
