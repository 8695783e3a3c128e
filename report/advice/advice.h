// Advice: the changes a bottleneck report suggests, each a concrete setting and its value, in
// the words of whoever consumed the batches: a sluice-train flag ("--decompress-threads=4") or
// a sluice.Loader argument ("decompress_threads=4"). A suggestion that does not apply to the
// run (a lower zstd level for shards that are not compressed, u8 batches for a CPU backend) is
// never made. docs/bottleneck.md has the table of verdicts, advice and measured effect;
// --check-advice (engine/job/advice_check.h) runs the change and prints before and after.
// Thread safety: plain values.
#ifndef SLUICE_REPORT_ADVICE_ADVICE_H_
#define SLUICE_REPORT_ADVICE_ADVICE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/stage_stats.h"
#include "report/record/run_record.h"

namespace sluice {

// The settings advice may change; each is a sluice-train flag and, where the Python Loader has
// it, a Loader argument.
enum class AdviceSetting {
  kReadAhead,          // --read-ahead, read_ahead_frames=
  kReadConcurrency,    // --read-concurrency, read_concurrency= (remote datasets)
  kDecompressThreads,  // --decompress-threads, decompress_threads=
  kPreprocessThreads,  // --preprocess-threads, preprocess_threads=
  kPoolSize,           // --pool-size, pool_size=
  kDeviceRingDepth,    // --device-ring-depth, device_ring_depth=
  kH2DFormat,          // --h2d-format, dtype=torch.uint8 (then normalize in the step)
  kCudaGraph,          // --cuda-graph
  kBatchSize,          // --batch-size, batch_size= (a change to training: scale the learning rate)
  kZstdLevel,          // sluice-shard create --zstd-level (a new dataset: not checked by a rerun)
  kImageSide,          // the stored images at this fraction of their side (a new dataset)
};

// A change to the data (a new dataset: sluice-shard create), which a rerun of the job cannot
// make: its gain is the model's prediction, and the advice says how to check it.
bool IsDataChange(AdviceSetting setting);

struct Advice {
  AdviceSetting setting = AdviceSetting::kPoolSize;
  std::string value;  // "4", "u8", "true", "1"
  std::string why;    // what it relieves, one clause
  // The resource model's rate with the change over its rate for the run as it was
  // (PredictedSpeedup, report/advice/price.h); 0: not priced. Advice under
  // kMinAdvisedSpeedup is never given.
  double predicted_speedup = 0;
};

// "--decompress-threads=4" for sluice-train, "decompress_threads=4" for a Python consumer; the
// shard tool's setting reads "sluice-shard create --zstd-level=1" for both.
std::string AdviceText(const Advice& advice, Consumer consumer);
// The flag name without dashes' value, "decompress-threads".
const char* AdviceFlag(AdviceSetting setting);
// The setting whose AdviceFlag is `flag` (a report's verdict.advice[].setting); nullopt for
// none.
std::optional<AdviceSetting> ParseAdviceFlag(std::string_view flag);
// The sluice.Loader argument the setting is, "decompress_threads"; "" where the Loader has none.
const char* AdviceLoaderArgument(AdviceSetting setting);

// Whether the stored frames are compressed enough for a zstd level to matter: the decompress
// stage's raw bytes over the read stage's stored bytes, at least 1.1.
bool FramesAreCompressed(const PipelineStats& pipeline);

// The copy stage was held back by the device ring at least as long as it copied: the link had
// room, the slots did not. The evidence for more ring slots (the advice and autotune).
bool CopiesWaitedForSlots(const StageStats& h2d);

// The changes that relieve `stage`, given the run: its concurrency `threads`, the pool, the
// ring, the batch format and the device. Empty when no setting of the run relieves it.
std::vector<Advice> AdviceFor(Stage stage, int threads, int cores, const RunRecord& run,
                              bool on_device, bool is_cuda);

}  // namespace sluice

#endif  // SLUICE_REPORT_ADVICE_ADVICE_H_
