// The stages, once: one row each, keyed by pipeline/stage_stats.h's Stage enum. A row says
// what the stage is called (in flags, JSON, the trace and every sentence), what may be done to
// it (a what-if run frees it, --inject-delay slows it) and, for a stage with a row of the
// bottleneck report, how the report, the verdict, the trace, the HTML page and the ceilings
// read it. Adding a stage is a value of the enum, a row here and its measurement
// (docs/architecture.md, "Where to change what"); a report row number always comes from this
// table (ReportRow), never from the enum's integer.
// Thread safety: constants.
#ifndef SLUICE_REPORT_STAGES_H_
#define SLUICE_REPORT_STAGES_H_

#include <array>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/stage_stats.h"
#include "report/advice/advice.h"
#include "report/record/ceiling_figures.h"

namespace sluice {

// Where a row's figures come from.
enum class RowSource {
  kGraphStage,  // a node of the pipeline's graph: its StageStats
  kPinnedPool,  // the wait for a pinned buffer: a wait, not work, so it has no capacity
  kCompute,     // the training step: ComputeStats, with the consumer's wait as its input wait
  // A part of another stage's work, timed on its own on that stage's threads (`part_of`; decode
  // inside preprocess): its busy time is inside the other stage's, so it is not counted in the
  // CPU budget twice, and its shares are of the other stage's time.
  kPartOfStage,
};

// The timeline track (report/render/trace_writer.h) a stage's spans are drawn on.
enum class TraceTrack {
  kWorkerThread,  // the pipeline thread that ran the span
  kPinnedWait,    // kTraceTidPinnedWait
  kCopyStream,    // kTraceTidCopyStream
  kCompute,       // kTraceTidCompute
};

struct StageInfo {
  Stage stage;
  const char* name;  // in flags, JSON, the trace and every sentence
  // --what-if=<name> makes it free (DiagnosticsOptions::what_if; compute: the job skips the
  // step, TrainJobOptions::compute_free).
  bool what_if = false;
  // --inject-delay=<name>:US slows each of its items (DiagnosticsOptions::inject_delay_us;
  // compute: TrainJobOptions::inject_compute_delay_us).
  bool inject_delay = false;
  // The stage whose node runs it, on whose threads it is timed on its own (decode and the
  // transform chain: preprocess); nullopt for a stage of its own. A freed whole confirms a
  // part; a part's row has no waits of its own; the verdict names the part that takes most of
  // the whole's time.
  std::optional<Stage> part_of = std::nullopt;

  // The report's row; a stage without one (delivery, the probe's loader, the transforms: a
  // part of preprocess's row) leaves `title` null and the rest as is.
  const char* title = nullptr;  // the HTML page's box heading
  const char* unit = nullptr;   // what one of the row's `items` is: "frame", "batch" or "step"
  RowSource source = RowSource::kGraphStage;
  // Counted in the CPU budget when it runs on a host core (compute: only off the device; on
  // a device the host's enqueue time is counted instead).
  bool cpu_work = false;
  // The ceiling the row is held against (nullptr: none), and whether it is per thread (then
  // times min(concurrency, cores)) or for the whole stage.
  Ceiling Ceilings::*ceiling = nullptr;
  bool ceiling_per_thread = false;
  // The settings whose advice may relieve the stage (AdviceFor, advice.h), in the order the
  // verdict names them; AdviceFor names no other.
  std::array<std::optional<AdviceSetting>, 2> advice = {};
  TraceTrack track = TraceTrack::kWorkerThread;

  constexpr bool has_report_row() const { return title != nullptr; }
};
// A row of the report's (kReportStageTable below): a StageInfo with a title.
using ReportStageInfo = StageInfo;

inline constexpr std::array<StageInfo, 10> kStageTable = {{
    {.stage = Stage::kRead,
     .name = "read",
     .what_if = true,
     .inject_delay = true,
     .title = "read",
     .unit = "frame",
     .source = RowSource::kGraphStage,
     .cpu_work = true,
     .ceiling = &Ceilings::read,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kReadAhead, std::nullopt},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kDecompress,
     .name = "decompress",
     .what_if = true,
     .inject_delay = true,
     .title = "decompress",
     .unit = "frame",
     .source = RowSource::kGraphStage,
     .cpu_work = true,
     .ceiling = &Ceilings::decompress,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kDecompressThreads, std::nullopt},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kDecode,
     .name = "decode",
     .what_if = true,
     .inject_delay = true,
     .part_of = Stage::kPreprocess,
     .title = "decode (in preprocess)",
     .unit = "image",
     .source = RowSource::kPartOfStage,
     .cpu_work = false,
     .ceiling = &Ceilings::decode,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kPreprocessThreads, AdviceSetting::kImageSide},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kPreprocess,
     .name = "preprocess",
     .what_if = true,
     .inject_delay = true,
     .title = "preprocess",
     .unit = "batch",
     .source = RowSource::kGraphStage,
     .cpu_work = true,
     .ceiling = &Ceilings::preprocess,
     .ceiling_per_thread = true,
     .advice = {AdviceSetting::kPreprocessThreads, AdviceSetting::kH2DFormat},
     .track = TraceTrack::kWorkerThread},
    {.stage = Stage::kPinnedWait,
     .name = "pinned_wait",
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
     .name = "h2d",
     .what_if = true,
     .inject_delay = true,
     .title = "h2d",
     .unit = "batch",
     .source = RowSource::kGraphStage,
     .cpu_work = false,
     .ceiling = &Ceilings::h2d_pinned,
     .ceiling_per_thread = false,
     .advice = {AdviceSetting::kH2DFormat, AdviceSetting::kDeviceRingDepth},
     .track = TraceTrack::kCopyStream},
    {.stage = Stage::kDelivery, .name = "delivery"},
    {.stage = Stage::kCompute,
     .name = "compute",
     .what_if = true,
     .inject_delay = true,
     .title = "compute",
     .unit = "step",
     .source = RowSource::kCompute,
     .cpu_work = true,
     .ceiling = &Ceilings::compute,
     .ceiling_per_thread = false,
     .advice = {AdviceSetting::kCudaGraph, std::nullopt},
     .track = TraceTrack::kCompute},
    {.stage = Stage::kLoader, .name = "loader"},
    {.stage = Stage::kTransforms,
     .name = "transforms",
     .what_if = true,
     .part_of = Stage::kPreprocess},
}};

// The stage whose node runs `s` (StageInfo::part_of); nullopt for a stage of its own.
constexpr std::optional<Stage> PartOf(Stage s) {
  for (const StageInfo& info : kStageTable) {
    if (info.stage == s) return info.part_of;
  }
  return std::nullopt;
}

// kStageTable's name of `s`: "read", "decompress", ..., "transforms".
absl::string_view StageName(Stage s);
// Any of StageName's names; InvalidArgument "unknown stage '<name>' (read, ..., transforms)".
absl::StatusOr<Stage> ParseStage(absl::string_view name);
// A stage whose `property` (&StageInfo::what_if or &StageInfo::inject_delay) is true;
// InvalidArgument "unknown stage '<name>' (read, decompress, ...)" listing those.
absl::StatusOr<Stage> ParseStageWith(absl::string_view name, bool StageInfo::*property);
// The names of the stages whose `property` is true, in table order, joined by `separator`.
std::string StageNamesWith(bool StageInfo::*property, absl::string_view separator);

inline constexpr int kNumReportStages = [] {
  int n = 0;
  for (const StageInfo& info : kStageTable) n += info.has_report_row();
  return n;
}();

// The rows of the bottleneck report, in flow order: kStageTable's stages with a title (the
// enum's delivery, between h2d and compute, has none).
inline constexpr std::array<StageInfo, kNumReportStages> kReportStageTable = [] {
  std::array<StageInfo, kNumReportStages> out{};
  int n = 0;
  for (const StageInfo& info : kStageTable) {
    if (info.has_report_row()) out[n++] = info;
  }
  return out;
}();

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
