#include "engine/diagnostics/advice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

// Bounds of the flags (docs/limits.md): advice never names a value the tool refuses.
constexpr uint32_t kMaxPoolSize = 1024;
constexpr uint32_t kMaxReadAhead = 1024;
constexpr uint32_t kMaxRingDepth = 64;

const char* PythonArgument(AdviceSetting s) {
  switch (s) {
    case AdviceSetting::kReadAhead:
      return "read_ahead_frames";
    case AdviceSetting::kDecompressThreads:
      return "decompress_threads";
    case AdviceSetting::kPreprocessThreads:
      return "preprocess_threads";
    case AdviceSetting::kPoolSize:
      return "pool_size";
    case AdviceSetting::kDeviceRingDepth:
      return "device_ring_depth";
    case AdviceSetting::kH2DFormat:
      return "dtype";
    case AdviceSetting::kCudaGraph:
    case AdviceSetting::kZstdLevel:
      return "";
  }
  return "";
}

std::string Doubled(uint64_t now, uint64_t at_most) {
  return absl::StrCat(std::min<uint64_t>(at_most, std::max<uint64_t>(1, now) * 2));
}

}  // namespace

const char* AdviceFlag(AdviceSetting s) {
  switch (s) {
    case AdviceSetting::kReadAhead:
      return "read-ahead";
    case AdviceSetting::kDecompressThreads:
      return "decompress-threads";
    case AdviceSetting::kPreprocessThreads:
      return "preprocess-threads";
    case AdviceSetting::kPoolSize:
      return "pool-size";
    case AdviceSetting::kDeviceRingDepth:
      return "device-ring-depth";
    case AdviceSetting::kH2DFormat:
      return "h2d-format";
    case AdviceSetting::kCudaGraph:
      return "cuda-graph";
    case AdviceSetting::kZstdLevel:
      return "zstd-level";
  }
  return "";
}

std::string AdviceText(const Advice& a, Consumer consumer) {
  if (a.setting == AdviceSetting::kZstdLevel) {
    return absl::StrCat("sluice-shard create --zstd-level=", a.value);
  }
  if (consumer == Consumer::kPython && *PythonArgument(a.setting) != '\0') {
    if (a.setting == AdviceSetting::kH2DFormat) {
      return "dtype=torch.uint8 with the normalization in your step on the device";
    }
    return absl::StrCat(PythonArgument(a.setting), "=", a.value);
  }
  return absl::StrCat("--", AdviceFlag(a.setting), "=", a.value);
}

bool FramesAreCompressed(const PipelineStats& p) {
  const uint64_t stored = p[Stage::kRead].bytes;
  const uint64_t raw = p[Stage::kDecompress].bytes;
  return stored > 0 && static_cast<double>(raw) >= 1.1 * static_cast<double>(stored);
}

std::vector<Advice> AdviceFor(Stage stage, int threads, int cores, const RunRecord& run,
                              bool on_device, bool is_cuda) {
  std::vector<Advice> out;
  const uint64_t max_threads = static_cast<uint64_t>(4 * std::max(1, cores));
  const bool more_threads = static_cast<uint64_t>(threads) < max_threads;
  switch (stage) {
    case Stage::kRead:
      if (run.read_ahead_frames < kMaxReadAhead) {
        out.push_back({AdviceSetting::kReadAhead, Doubled(run.read_ahead_frames, kMaxReadAhead),
                       "more frames in flight hide the serial reader's latency"});
      }
      break;
    case Stage::kDecompress:
      if (more_threads) {
        out.push_back({AdviceSetting::kDecompressThreads, Doubled(threads, max_threads),
                       "more frames decompressed at once"});
      }
      if (FramesAreCompressed(run.pipeline)) {
        out.push_back({AdviceSetting::kZstdLevel, "1", "cheaper frames to decompress"});
      }
      break;
    case Stage::kPreprocess:
      if (more_threads) {
        out.push_back({AdviceSetting::kPreprocessThreads, Doubled(threads, max_threads),
                       "more batches assembled at once"});
      }
      if (on_device && run.h2d_format != H2DFormat::kU8) {
        out.push_back({AdviceSetting::kH2DFormat, "u8", "normalization moves to the device"});
      }
      break;
    case Stage::kPinnedWait:
      if (run.pipeline.pool_buffers < kMaxPoolSize) {
        out.push_back({AdviceSetting::kPoolSize, Doubled(run.pipeline.pool_buffers, kMaxPoolSize),
                       "more batches in flight"});
      }
      break;
    case Stage::kH2D:
      if (run.h2d_format != H2DFormat::kU8) {
        out.push_back({AdviceSetting::kH2DFormat, "u8",
                       run.h2d_format == H2DFormat::kF32 ? "4x fewer bytes than f32"
                                                         : "2x fewer bytes than f16"});
      }
      if (run.pipeline.ring_depth > 0 && run.pipeline.ring_depth < kMaxRingDepth) {
        out.push_back({AdviceSetting::kDeviceRingDepth,
                       Doubled(run.pipeline.ring_depth, kMaxRingDepth),
                       "more copies in flight behind compute"});
      }
      break;
    case Stage::kCompute:
      if (is_cuda) out.push_back({AdviceSetting::kCudaGraph, "true", "one launch per step"});
      break;
    case Stage::kDelivery:
    case Stage::kLoader:  // another library's loader: none of sluice's settings apply
      break;
  }
  return out;
}

}  // namespace sluice
