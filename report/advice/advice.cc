#include "report/advice/advice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pipeline/batch.h"
#include "pipeline/resource_limits.h"

namespace sluice {
namespace {

// Advice never names a value the tool refuses: the bounds are pipeline/resource_limits.h's.
constexpr uint64_t kMaxReadAhead = kMaxReadAheadFrames;
// --read-concurrency's bound (storage/remote/remote_env.h kMaxReadConcurrency).
constexpr uint64_t kMaxReadConcurrency = 256;
// The share of the read concurrency in flight on average above which the requests are the
// limit (by Little's law the rate then follows the concurrency over the latency).
constexpr double kFullConcurrency = 0.75;

// Each setting's sluice-train flag and, where sluice.Loader has it, its argument ("": none).
struct SettingSpellings {
  AdviceSetting setting;
  const char* flag;
  const char* python;
};
constexpr SettingSpellings kSettings[] = {
    {AdviceSetting::kReadAhead, "read-ahead", "read_ahead_frames"},
    {AdviceSetting::kReadConcurrency, "read-concurrency", "read_concurrency"},
    {AdviceSetting::kDecompressThreads, "decompress-threads", "decompress_threads"},
    {AdviceSetting::kPreprocessThreads, "preprocess-threads", "preprocess_threads"},
    {AdviceSetting::kPoolSize, "pool-size", "pool_size"},
    {AdviceSetting::kDeviceRingDepth, "device-ring-depth", "device_ring_depth"},
    {AdviceSetting::kH2DFormat, "h2d-format", "dtype"},
    {AdviceSetting::kCudaGraph, "cuda-graph", ""},
    {AdviceSetting::kBatchSize, "batch-size", "batch_size"},
    {AdviceSetting::kZstdLevel, "zstd-level", ""},
    {AdviceSetting::kImageSide, "image-side", ""},
};

const SettingSpellings& NamesOf(AdviceSetting s) {
  for (const SettingSpellings& n : kSettings) {
    if (n.setting == s) return n;
  }
  return kSettings[0];  // unreachable: every setting has a row
}

// The stage was held back downstream (the copy stream by the device ring, the reader by the
// frame budget) at least as long as it worked: it had room, the slots did not.
bool WaitedAsLongAsItWorked(const StageStats& stage) {
  return stage.busy_ns > 0 && stage.wait_output_ns >= stage.busy_ns;
}

// Larger batches than this are not advised: a change to training of that size is the user's.
constexpr uint64_t kMaxAdvisedBatch = 4096;

std::string Doubled(uint64_t now, uint64_t at_most) {
  return absl::StrCat(std::min<uint64_t>(at_most, std::max<uint64_t>(1, now) * 2));
}

}  // namespace

const char* AdviceFlag(AdviceSetting s) { return NamesOf(s).flag; }

bool IsDataChange(AdviceSetting s) {
  return s == AdviceSetting::kZstdLevel || s == AdviceSetting::kImageSide;
}

std::optional<AdviceSetting> ParseAdviceFlag(std::string_view flag) {
  for (const SettingSpellings& n : kSettings) {
    if (flag == n.flag) return n.setting;
  }
  return std::nullopt;
}

const char* AdviceLoaderArgument(AdviceSetting s) { return NamesOf(s).python; }

// (At 8% held back, on a u8 run over a 50 MB/s simulated link, twice the slots measured 1.06x:
// a busy link gains little from them.)
bool CopiesWaitedForSlots(const StageStats& h2d) { return WaitedAsLongAsItWorked(h2d); }

std::string AdviceText(const Advice& a, Consumer consumer) {
  if (a.setting == AdviceSetting::kZstdLevel) {
    return absl::StrCat("sluice-shard create --zstd-level=", a.value);
  }
  if (a.setting == AdviceSetting::kImageSide) {
    return absl::StrCat("store the images at ", a.value, " of their side");
  }
  if (consumer == Consumer::kPython && *AdviceLoaderArgument(a.setting) != '\0') {
    if (a.setting == AdviceSetting::kH2DFormat) {
      return "dtype=torch.uint8 with the normalization in your step on the device";
    }
    return absl::StrCat(AdviceLoaderArgument(a.setting), "=", a.value);
  }
  return absl::StrCat("--", AdviceFlag(a.setting), "=", a.value);
}

bool FramesAreCompressed(const PipelineStats& p) {
  const uint64_t stored = p[Stage::kRead].bytes;
  const uint64_t raw = p[Stage::kDecompress].bytes;
  return stored > 0 && static_cast<double>(raw) >= 1.1 * static_cast<double>(stored);
}

// Whether images stored at half their side would still have at least twice a sample's side
// (four times its pixels), so that the transforms still crop and downscale rather than
// upscale: the decoded elements per image (u8) over a batch sample's elements (its bytes over
// the batch dtype's size), at least 16 before halving. True when either is unknown. (Floor 4,
// a new user halved down to 37-75 px photos for a 32 px crop, each time as advised.)
bool HalvedImagesHoldASample(const RunRecord& run) {
  const StageStats& decode = run.pipeline[Stage::kDecode];
  const StageStats& pre = run.pipeline[Stage::kPreprocess];
  if (decode.items == 0 || decode.bytes == 0 || pre.samples == 0 || pre.bytes == 0) return true;
  // The images as stored (stored_bytes), not what was decoded of them: a crop's window decodes
  // a fraction of each image (the diagnosis benchmark's CenterCrop(32) decoded 5% of 96-256 px
  // photos, and halving was no longer advised).
  const uint64_t stored = run.pipeline.decode_stored_bytes;
  const uint64_t image_bytes = stored > 0 ? stored : decode.bytes;
  const double decoded = static_cast<double>(image_bytes) / static_cast<double>(decode.items);
  const double sample = static_cast<double>(pre.bytes) / static_cast<double>(pre.samples) /
                        static_cast<double>(H2DFormatSize(run.h2d_format));
  return decoded >= 16 * sample;
}

std::vector<Advice> AdviceFor(Stage stage, int threads, int cores, const RunRecord& run,
                              bool on_device, bool is_cuda) {
  std::vector<Advice> out;
  const uint64_t max_threads = static_cast<uint64_t>(4 * std::max(1, cores));
  const bool more_threads = static_cast<uint64_t>(threads) < max_threads;
  switch (stage) {
    case Stage::kRead:
      // Read-ahead helps only a reader held back by the frame budget; one serial reader that
      // is slow itself gains nothing (measured: 0.91-1.02x for --read-ahead=8 with a 5 ms read
      // latency, tests/engine/job/advice_scenarios_test.cc).
      if (run.read_ahead_frames < kMaxReadAhead &&
          WaitedAsLongAsItWorked(run.pipeline[Stage::kRead])) {
        out.push_back({AdviceSetting::kReadAhead, Doubled(run.read_ahead_frames, kMaxReadAhead),
                       "more frames in flight hide the serial reader's latency"});
      }
      // A remote dataset whose requests kept the read concurrency full (on average, not at a
      // peak: a reader held back by the server's bandwidth peaks at it too, and gains nothing,
      // measured 1.0x from 8 to 32 behind a 40 MB/s cap): more ranges in flight hide the
      // object store's latency.
      // A tuned concurrency stopped where doubling no longer paid: nothing to advise.
      if (run.network && run.read_concurrency > 0 && !run.read_concurrency_tuned &&
          run.read_concurrency < static_cast<uint32_t>(kMaxReadConcurrency) &&
          run.network->mean_in_flight >= kFullConcurrency * run.read_concurrency) {
        out.push_back({AdviceSetting::kReadConcurrency,
                       Doubled(run.read_concurrency, kMaxReadConcurrency),
                       "more byte ranges in flight hide the object store's latency"});
      }
      break;
    case Stage::kDecompress:
      if (more_threads) {
        out.push_back({AdviceSetting::kDecompressThreads, Doubled(threads, max_threads),
                       "more frames decompressed at once"});
      }
      // No zstd level: decompression's speed barely follows the level, and the model cannot
      // price it (never measured to pay).
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
    case Stage::kDecode:  // decoding runs on the preprocess threads
      if (more_threads) {
        out.push_back({AdviceSetting::kPreprocessThreads, Doubled(threads, max_threads),
                       "more images decoded at once"});
      }
      // Decoding's cost follows the pixels: half the side, a quarter of them. Not where the
      // halved images would hold fewer pixels than a sample (the advice, taken again and again,
      // would end below the transforms' output size).
      if (HalvedImagesHoldASample(run)) {
        out.push_back({AdviceSetting::kImageSide, "0.5", "a quarter of the pixels to decode"});
      }
      break;
    case Stage::kPinnedWait:
      // No setting: twice the buffers did not pay where the pool was full (measured 0.78-1.08x
      // from 1 and 2 buffers, tests/engine/job/advice_scenarios_test.cc; issue runs were slower
      // with --pool-size=256). The sentence still says that every buffer was in use.
      break;
    case Stage::kH2D:
      // Fewer bytes help only a link that was busy copying; copies held back by the ring
      // gain nothing from them (a 25 GB/s simulated link, ring full: u8 measured 0.75x).
      if (run.h2d_format != H2DFormat::kU8 && !CopiesWaitedForSlots(run.pipeline[Stage::kH2D])) {
        out.push_back({AdviceSetting::kH2DFormat, "u8",
                       run.h2d_format == H2DFormat::kF32 ? "4x fewer bytes than f32"
                                                         : "2x fewer bytes than f16"});
      }
      // More ring slots help only a copy stream that waited for a free slot (its wait-out); a
      // saturated link gains nothing from them (measured: 1.00x on a 50 MB/s simulated link,
      // 8% held back: 1.06x). Up to the default depth: 1 -> 2 slots measured 1.25-1.38x, 8 ->
      // 16 measured 0.98x. Half as long as it copied is enough: one slot, a 1 ms copy and a
      // 0.5 ms step wait 0.5 ms per copy, and two slots hide the step.
      // A copy's fixed cost (latency, launch) is paid per batch: larger batches pay it for more
      // samples. Priced from the h2d ceiling's fixed part per copy (report/advice/price.cc);
      // without one, not priced and not given.
      if (run.batch_size > 0 && run.batch_size < kMaxAdvisedBatch) {
        out.push_back({AdviceSetting::kBatchSize, Doubled(run.batch_size, kMaxAdvisedBatch),
                       "each copy's fixed cost paid for twice the samples; a change to training: "
                       "scale the learning rate with it"});
      }
      if (run.pipeline.ring_depth > 0 && run.pipeline.ring_depth < kDefaultDeviceRingDepth &&
          2 * run.pipeline[Stage::kH2D].wait_output_ns >= run.pipeline[Stage::kH2D].busy_ns &&
          run.pipeline[Stage::kH2D].busy_ns > 0) {
        out.push_back({AdviceSetting::kDeviceRingDepth,
                       Doubled(run.pipeline.ring_depth, kDefaultDeviceRingDepth),
                       "more copies in flight behind compute"});
      }
      break;
    case Stage::kCompute:
      if (is_cuda) out.push_back({AdviceSetting::kCudaGraph, "true", "one launch per step"});
      break;
    case Stage::kDelivery:
    case Stage::kLoader:      // another library's loader: none of sluice's settings apply
    case Stage::kTransforms:  // a part of preprocess, never a verdict's stage
      break;
  }
  return out;
}

}  // namespace sluice
