// The simulated accelerator: device/device.h implemented in host memory, so the device half of
// the data path (the pipeline's upload stage, the device batch ring, the trainer's event waits
// and slot releases, H2D and compute timing) runs the same code in CI as on a GPU, and a user
// can ask what a given accelerator would need from this host's pipeline.
//
// The model (docs/sim.md says what it captures and what it does not):
// - Every stream is a thread that runs its operations in enqueue order.
// - A copy takes link_latency_ns + bytes / link_bytes_per_s of wall time on its stream (a
//   copy engine per copy stream); the bytes land at the end of that time.
// - Events are recorded and waited on across streams exactly as CUDA orders them: a Wait waits
//   for the most recent Record enqueued before it; timing events carry the host steady clock
//   at completion, so NanosSince is device time and HostNanos places it on the host timeline.
// - Callbacks of all streams of a device run one at a time (CUDA may serialize host functions);
//   Delay holds only its stream, for a modelled time (a sleep).
// - Work launched with SimLaunch (the simulated kernels: the CPU backend's code) runs on the
//   stream's thread, and takes at least its modelled time.
// - poison: a copy first fills its destination with 0xFF bytes (NaN floats, label -1) and
//   holds them for the copy's duration, so a reader that did not wait for the copy's event, or
//   a slot reused before its reader released it, reads poison instead of data.
// - jitter_seed != 0: every stream operation is delayed by a seeded random 0..jitter_max_ns,
//   to shake out ordering assumptions that only hold with lucky timing.
//
// Ownership, errors, thread safety: as device/device.h. Streams drain and join their thread
// when destroyed.
#ifndef SLUICE_DEVICE_SIM_SIM_DEVICE_H_
#define SLUICE_DEVICE_SIM_SIM_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/device.h"

namespace sluice::device {

struct SimOptions {
  double link_bytes_per_s = 25e9;  // modelled host <-> device bandwidth (PCIe 4 x16: ~25 GB/s)
  int64_t link_latency_ns = 0;     // added to every copy
  bool poison = false;
  uint64_t jitter_seed = 0;  // 0: no jitter
  int64_t jitter_max_ns = 50'000;
  // Once this is true (a stop was requested), modelled time is no longer waited for: copies and
  // launched work still run, in stream order and with the same results, but each returns as
  // soon as its real work is done (a modelled wait in progress ends within kStopPollNs). A stop
  // on a slow modelled device then ends within one step's real work instead of the modelled
  // time of every step already enqueued. Borrowed: must outlive the device. Null: never.
  const std::atomic<bool>* skip_modelled_time = nullptr;
  // A second flag of the same meaning, e.g. the stop the ranks of a data-parallel job agreed
  // on (a rank that got no signal of its own skips too). Borrowed likewise. Null: none.
  const std::atomic<bool>* skip_modelled_time_too = nullptr;
};

// How often a modelled wait checks SimOptions::skip_modelled_time.
inline constexpr int64_t kStopPollNs = 20'000'000;

// Opens a simulated device named "sim:<ordinal>".
absl::StatusOr<std::unique_ptr<Device>> OpenSimDevice(const SimOptions& options, int ordinal = 0);

// Runs `work` on `stream`'s thread in stream order, taking at least `min_ns` of wall time
// (the modelled kernel time). `stream` must come from a simulated device (kInvalidArgument
// otherwise). `work` may not call into the device layer.
absl::Status SimLaunch(Stream* stream, std::function<void()> work, int64_t min_ns = 0);

// True when `device` is a simulated device.
bool IsSimDevice(const Device* device);

}  // namespace sluice::device

#endif  // SLUICE_DEVICE_SIM_SIM_DEVICE_H_
