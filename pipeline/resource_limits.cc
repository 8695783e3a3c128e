#include "pipeline/resource_limits.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/limits.h"
#include "common/status_macros.h"
#include "pipeline/batch_format.h"

namespace sluice {
namespace {

// "pool-size" -> "--pool-size" or "pool_size".
std::string SettingName(absl::string_view flag, SettingNames names) {
  if (names == SettingNames::kFlags) return absl::StrCat("--", flag);
  return absl::StrReplaceAll(flag, {{"-", "_"}});
}

// The common/limits.h checks say "--<flag>: ..."; the same message under the caller's name.
absl::Status Renamed(absl::Status s, absl::string_view flag, SettingNames names) {
  if (s.ok() || names == SettingNames::kFlags) return s;
  const std::string prefix = absl::StrCat("--", flag);
  std::string message(s.message());
  if (absl::StartsWith(message, prefix)) {
    message = absl::StrCat(SettingName(flag, names), message.substr(prefix.size()));
  }
  return absl::Status(s.code(), message);
}

absl::Status AtLeast(absl::string_view flag, int64_t value, int64_t min, SettingNames names,
                     absl::string_view why = "") {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(SettingName(flag, names), ": must be >= ", min, why, ", got ", value));
}

}  // namespace

absl::Status CheckResourceSettings(const ResourceSettings& s, SettingNames names) {
  const std::pair<absl::string_view, int64_t> threads[] = {
      {"threads", s.threads},
      {"decompress-threads", s.decompress_threads},
      {"preprocess-threads", s.preprocess_threads}};
  for (const auto& [flag, value] : threads) {
    RETURN_IF_ERROR(AtLeast(flag, value, 0, names));
    RETURN_IF_ERROR(Renamed(CheckThreadCount(flag, value), flag, names));
  }
  RETURN_IF_ERROR(AtLeast("pool-size", s.pool_size, 0, names));
  if (s.pool_size == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(SettingName("pool-size", names), ": must be 0 (auto) or >= 2, got 1"));
  }
  RETURN_IF_ERROR(Renamed(CheckAtMost("pool-size", s.pool_size, kMaxPoolSize, "batch buffers"),
                          "pool-size", names));
  const absl::string_view ahead =
      names == SettingNames::kFlags ? "read-ahead" : "read-ahead-frames";
  RETURN_IF_ERROR(AtLeast(ahead, s.read_ahead_frames, 0, names));
  RETURN_IF_ERROR(Renamed(CheckAtMost(ahead, s.read_ahead_frames, kMaxReadAheadFrames,
                                      "frames held decompressed ahead of use"),
                          ahead, names));
  RETURN_IF_ERROR(AtLeast("device-ring-depth", s.device_ring_depth, kMinDeviceRingDepth, names,
                          " (one slot computing, one filling)"));
  return Renamed(CheckAtMost("device-ring-depth", s.device_ring_depth, kMaxDeviceRingDepth,
                             "device batch slots"),
                 "device-ring-depth", names);
}

absl::StatusOr<uint64_t> PipelineBufferBytes(const PipelineOptions& o, const RecordSpec& spec) {
  const uint64_t world = std::max<uint32_t>(1, o.slice.world_size);
  const uint64_t batch = (o.order.batch_size + world - 1) / world;  // this rank's share
  // The batch's samples are the transforms' output (the stored sample without them).
  ASSIGN_OR_RETURN(const ResolvedBatchFormat format,
                   ResolveBatchFormat(spec, o.format, SettingNames::kPythonArguments));
  const SampleSpec& s = format.sample;
  const std::string what = absl::StrCat("batch buffers of ", batch, " samples of ", s.channels, "x",
                                        s.height, "x", s.width);
  ASSIGN_OR_RETURN(const uint64_t values, CheckedProduct(what, {s.height, s.width, s.channels}));
  // Samples in the h2d format, then a label and a record id (4 bytes each) per record.
  ASSIGN_OR_RETURN(const uint64_t buffer_bytes,
                   CheckedProduct(what, {batch, values * H2DFormatSize(s.dtype) + 8}));
  uint64_t buffers = o.resources.pool_size;
  if (buffers == 0) buffers = AutoPoolSize(batch, buffer_bytes);
  if (o.placement.device != nullptr) buffers += o.resources.device_ring_depth;
  return CheckedProduct(what, {buffer_bytes, buffers});
}

absl::Status CheckPipelineMemory(const PipelineOptions& o, const RecordSpec& spec,
                                 SettingNames names) {
  ASSIGN_OR_RETURN(const uint64_t bytes, PipelineBufferBytes(o, spec));
  const uint32_t pool = o.resources.pool_size;
  std::string what = absl::StrCat("the batch buffers (", SettingName("pool-size", names), "=",
                                  pool == 0 ? std::string("automatic") : absl::StrCat(pool));
  if (o.placement.device != nullptr) {
    absl::StrAppend(&what, ", ", SettingName("device-ring-depth", names), "=",
                    o.resources.device_ring_depth);
  }
  absl::StrAppend(&what, ", ", SettingName("batch-size", names), "=", o.order.batch_size, ")");
  return CheckMemory(what, bytes);
}

}  // namespace sluice
