// The stages of the bottleneck report, one row each, in flow order: how the report, the
// verdict, the trace, the HTML page and the ceilings read a stage. What a stage is (its name,
// whether a what-if run frees it, whether --inject-delay slows it) is pipeline/stage_stats.h's
// kStageTable, once; this table only adds the report's view of it, keyed by the stage. Adding
// a stage is a value of the Stage enum, a row of kStageTable, a row here and its measurement
// (docs/architecture.md, "Where to change what"); a row number always comes from this table
// (ReportRow), never from the enum's integer.
// Thread safety: constants.
#ifndef SLUICE_REPORT_STAGES_H_
#define SLUICE_REPORT_STAGES_H_

#include <array>
#include <optional>

#include "pipeline/stage_stats.h"
#include "report/advice/advice.h"
#include "report/record/ceiling_figures.h"

namespace sluice {

// Where a row's figures come from.
enum class RowSource {
  kGraphStage,  // a node of the pipeline's graph: its StageStats
  kPinnedPool,  // the wait for a pinned buffer: a wait, not work, so it has no capacity
  kCompute,     // the training step: ComputeStats, with the consumer's wait as its input wait
  // The decoding of encoded images: a part of the preprocess stage's work, on its threads
  // (its busy time is inside preprocess's, so it is not counted in the CPU budget twice).
  kDecode,
};

// The timeline track (report/render/trace_writer.h) a stage's spans are drawn on.
enum class TraceTrack {
  kWorkerThread,  // the pipeline thread that ran the span
  kPinnedWait,    // kTraceTidPinnedWait
  kCopyStream,    // kTraceTidCopyStream
  kCompute,       // kTraceTidCompute
};

struct ReportStageInfo {
  Stage stage;        // its name is StageName(stage) (pipeline/stage_stats.h's kStageTable)
  const char* title;  // the HTML page's box heading
  const char* unit;   // what one of the row's `items` is: "frame", "batch" or "step"
  RowSource source;
  // Counted in the CPU budget when it runs on a host core (compute: only off the device; on
  // a device the host's enqueue time is counted instead).
  bool cpu_work;
  // The ceiling the row is held against (nullptr: none), and whether it is per thread (then
  // times min(concurrency, cores)) or for the whole stage.
  Ceiling Ceilings::*ceiling;
  bool ceiling_per_thread;
  // The settings whose advice may relieve the stage (AdviceFor, advice.h), in the order the
  // verdict names them; AdviceFor names no other.
  std::array<std::optional<AdviceSetting>, 2> advice;
  TraceTrack track;
};

inline constexpr std::array<ReportStageInfo, 7> kReportStageTable = {{
    {.stage = Stage::kRead,
     .title = "read",
     .unit = "frame",
     .source = RowSource::kGraphStage,
     .cpu_work = true,
     .ceiling = &Ceilings::read,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kReadAhead, std::nullopt},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kDecompress,
     .title = "decompress",
     .unit = "frame",
     .source = RowSource::kGraphStage,
     .cpu_work = true,
     .ceiling = &Ceilings::decompress,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kDecompressThreads, AdviceSetting::kZstdLevel},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kDecode,
     .title = "decode (in preprocess)",
     .unit = "image",
     .source = RowSource::kDecode,
     .cpu_work = false,
     .ceiling = &Ceilings::decode,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kPreprocessThreads, std::nullopt},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kPreprocess,
     .title = "preprocess",
     .unit = "batch",
     .source = RowSource::kGraphStage,
     .cpu_work = true,
     .ceiling = &Ceilings::preprocess,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kPreprocessThreads, AdviceSetting::kH2DFormat},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kPinnedWait,
     .title = "pinned buffers",
     .unit = "batch",
     .source = RowSource::kPinnedPool,
     .cpu_work = false,
     .ceiling = nullptr,
     .ceiling_per_thread = false,
     // A larger pool did not pay in its own scenario (advice_scenarios_test.cc, SmallPool).
     .advice = {std::nullopt, std::nullopt},
     .track = TraceTrack::kPinnedWait},
    {.stage = Stage::kH2D,
     .title = "h2d",
     .unit = "batch",
     .source = RowSource::kGraphStage,
     .cpu_work = false,
     .ceiling = &Ceilings::h2d_pinned,
     .ceiling_per_thread = false,
     .advice = {AdviceSetting::kH2DFormat, AdviceSetting::kDeviceRingDepth},
     .track = TraceTrack::kCopyStream},
    {.stage = Stage::kCompute,
     .title = "compute",
     .unit = "step",
     .source = RowSource::kCompute,
     .cpu_work = true,
     .ceiling = &Ceilings::compute,
     .ceiling_per_thread = false,
     .advice = {AdviceSetting::kCudaGraph, std::nullopt},
     .track = TraceTrack::kCompute},
}};

inline constexpr int kNumReportStages = static_cast<int>(kReportStageTable.size());

// The report's stages in flow order (kReportStageTable's `stage` column).
inline constexpr std::array<Stage, kNumReportStages> kReportStages = [] {
  std::array<Stage, kNumReportStages> out{};
  for (int i = 0; i < kNumReportStages; ++i) out[i] = kReportStageTable[i].stage;
  return out;
}();

// The row of `s` in kReportStageTable; -1 for a stage without a row (kDelivery, kLoader).
constexpr int FindReportRow(Stage s) {
  for (int i = 0; i < kNumReportStages; ++i) {
    if (kReportStageTable[i].stage == s) return i;
  }
  return -1;
}

// The row of `s`, which must have one (a report's rows are indexed by it).
constexpr int ReportRow(Stage s) { return FindReportRow(s); }

// The table's row of `s`, which must have one; nullptr for kDelivery and kLoader.
constexpr const ReportStageInfo* FindReportStage(Stage s) {
  const int row = FindReportRow(s);
  return row < 0 ? nullptr : &kReportStageTable[row];
}

}  // namespace sluice

#endif  // SLUICE_REPORT_STAGES_H_
