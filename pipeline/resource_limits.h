// Resource limits: the bounds on the pipeline's resource settings (threads, buffers, read-ahead,
// device ring) and the memory check of its buffers, shared by sluice-train's flags and
// sluice.Loader's arguments so both refuse the same values with the same message
// (docs/limits.md, "Bounds on flags").
//
// Errors (one line, naming the setting as the caller spells it, the value and the bound):
//   kInvalidArgument    a setting below its minimum or above its maximum
//   kResourceExhausted  buffers whose size overflows or exceeds the memory available now
// Thread safety: plain functions (CheckPipelineMemory reads /proc and getrlimit).
#ifndef SLUICE_PIPELINE_RESOURCE_LIMITS_H_
#define SLUICE_PIPELINE_RESOURCE_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "pipeline/pipeline.h"
#include "storage/shard_format.h"

namespace sluice {

inline constexpr int64_t kMaxPoolSize = 1024;         // batch buffers
inline constexpr int64_t kMaxReadAheadFrames = 1024;  // frames held decompressed ahead of use
inline constexpr int64_t kMaxDeviceRingDepth = 64;    // device batch slots
inline constexpr int64_t kMinDeviceRingDepth = 2;     // one slot computing, one filling

// How the caller names its settings in messages.
enum class SettingNames {
  kFlags,            // "--pool-size" (sluice-train)
  kPythonArguments,  // "pool_size" (sluice.Loader)
};

// The resource settings as given, before they are narrowed to PipelineResources' types, so a
// value too large for those types is refused rather than wrapped. Threads: 0 means automatic.
struct ResourceSettings {
  int64_t threads = 0;
  int64_t decompress_threads = 0;
  int64_t preprocess_threads = 0;
  int64_t pool_size = 0;  // 0: automatic; else >= 2
  int64_t read_ahead_frames = 4;
  int64_t device_ring_depth = kDefaultDeviceRingDepth;
};

// Each setting in its range: threads in [0, MaxThreads()], pool_size 0 or in [2, kMaxPoolSize],
// read_ahead_frames in [0, kMaxReadAheadFrames], device_ring_depth in [2, kMaxDeviceRingDepth].
absl::Status CheckResourceSettings(const ResourceSettings& s, SettingNames names);

// The bytes of the batch buffers a pipeline with `options` over records of `spec` allocates
// (its samples as options.format's transforms output them; their errors as Pipeline::Create's):
// the pinned pool and, with a device placement, the device ring (memory of the host too on the
// simulated device). kResourceExhausted when the product overflows.
absl::StatusOr<uint64_t> PipelineBufferBytes(const PipelineOptions& options,
                                             const RecordSpec& spec);

// kResourceExhausted naming the settings, the bytes and the memory available when the buffers
// of PipelineBufferBytes do not fit in what the process can allocate now.
absl::Status CheckPipelineMemory(const PipelineOptions& options, const RecordSpec& spec,
                                 SettingNames names);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_RESOURCE_LIMITS_H_
