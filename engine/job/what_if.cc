#include "engine/job/what_if.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "report/advice/advice.h"

namespace sluice {
namespace {

// Speedups this close are within the machine's noise (the verdict's close-call rule).
constexpr double kWithinNoiseFraction = 0.15;

std::optional<Stage> FreedStage(const std::string& free_stage) {
  for (Stage s : {Stage::kRead, Stage::kDecompress, Stage::kDecode, Stage::kPreprocess, Stage::kH2D,
                  Stage::kCompute}) {
    if (StageName(s) == free_stage) return s;
  }
  return std::nullopt;
}

// The measured row of `stage`, or null.
const WhatIfRow* RowOf(const std::vector<WhatIfRow>& rows, Stage stage) {
  for (const WhatIfRow& r : rows) {
    if (r.note.empty() && r.speedup > 0 && FreedStage(r.free_stage) == stage) return &r;
  }
  return nullptr;
}

// The measured row with the largest speedup, or null.
const WhatIfRow* FastestRow(const std::vector<WhatIfRow>& rows) {
  const WhatIfRow* best = nullptr;
  for (const WhatIfRow& r : rows) {
    if (!r.note.empty() || r.speedup <= 0 || !FreedStage(r.free_stage)) continue;
    if (best == nullptr || r.speedup > best->speedup) best = &r;
  }
  return best;
}

}  // namespace

double TrainSamplesPerSecond(const TrainResult& t) {
  return t.train_seconds > 0 ? t.samples / t.train_seconds : 0.0;
}

TrainJobOptions WhatIfOptions(const TrainJobOptions& base, const std::string& stage) {
  TrainJobOptions o = base;
  o.pipeline.diagnostics.what_if = WhatIf::kNone;
  if (stage != "compute") {
    absl::StatusOr<WhatIf> w = ParseWhatIf(stage);
    if (w.ok()) o.pipeline.diagnostics.what_if = *w;
  }
  o.compute_free = stage == "compute";
  o.evaluate = false;
  o.checkpoint_dir.clear();
  o.resume.clear();
  o.export_safetensors.clear();
  o.metrics_out.clear();
  o.pipeline.diagnostics.trace_capacity = 0;
  o.on_progress = nullptr;
  o.on_epoch_end = nullptr;
  o.on_report = nullptr;
  return o;
}

absl::StatusOr<std::vector<WhatIfRow>> RunWhatIfTable(
    Env* env, const TrainJobOptions& base, const TrainJobResult& normal,
    const std::function<void(const std::string&)>& on_start) {
  const double normal_rate = TrainSamplesPerSecond(normal.train);
  std::vector<WhatIfRow> rows = {{"normal", "", normal_rate, normal_rate > 0 ? 1.0 : 0.0}};
  for (const char* stage : {"read", "decompress", "preprocess", "h2d", "compute"}) {
    if (std::string(stage) == "h2d" && !normal.run.compute.on_device) {
      rows.push_back({stage, "n/a: the CPU backend copies nothing", 0, 0});
      continue;
    }
    if (on_start) on_start(stage);
    ASSIGN_OR_RETURN(TrainJobResult r, RunTrainJob(env, WhatIfOptions(base, stage)));
    const double rate = TrainSamplesPerSecond(r.train);
    rows.push_back({stage, "", rate, normal_rate > 0 ? rate / normal_rate : 0.0});
  }
  if (!base.pipeline.format.transforms.empty()) {
    if (on_start) on_start("transforms");
    ASSIGN_OR_RETURN(TrainJobResult r, RunTrainJob(env, WhatIfOptions(base, "transforms")));
    const double rate = TrainSamplesPerSecond(r.train);
    rows.push_back({"transforms", "", rate, normal_rate > 0 ? rate / normal_rate : 0.0});
  }
  if (normal.run.pipeline[Stage::kDecode].items > 0) {  // the run decodes encoded images
    if (on_start) on_start("decode");
    ASSIGN_OR_RETURN(TrainJobResult r, RunTrainJob(env, WhatIfOptions(base, "decode")));
    const double rate = TrainSamplesPerSecond(r.train);
    rows.push_back({"decode", "", rate, normal_rate > 0 ? rate / normal_rate : 0.0});
  }
  return rows;
}

void ReconcileVerdictWithWhatIf(const std::vector<WhatIfRow>& rows, const RunRecord& run,
                                BottleneckReport* report) {
  const WhatIfRow* best = FastestRow(rows);
  if (best == nullptr || report->verdict == VerdictClass::kNoData) return;
  const Stage measured = *FreedStage(best->free_stage);
  const Stage attributed = report->limiting_stage;
  if (measured == attributed) return;
  // Decode is a part of preprocess: freeing the whole stage frees its decoding too, so the
  // measurement confirms an attribution to decode.
  if (attributed == Stage::kDecode && measured == Stage::kPreprocess) return;
  std::string named = absl::StrCat("the attribution named ", StageName(attributed));
  if (const WhatIfRow* own = RowOf(rows, attributed); own != nullptr) {
    absl::StrAppendFormat(&named, ", whose freeing gave %.2fx", own->speedup);
    if (best->speedup - own->speedup <= kWithinNoiseFraction * best->speedup) {
      absl::StrAppendFormat(&named, "; %s or %s: within %.0f%%", StageName(measured),
                            StageName(attributed), 100 * kWithinNoiseFraction);
    }
  }
  if (measured == Stage::kCompute) {
    report->verdict = VerdictClass::kComputeBound;
  } else if (report->verdict == VerdictClass::kComputeBound ||
             report->verdict == VerdictClass::kLaunchBound) {
    report->verdict = VerdictClass::kInputBound;
  }
  report->limiting_stage = measured;
  const StageRow& row = report->row(measured);
  report->advice =
      AdviceFor(measured, row.concurrency, report->cores, run, report->on_device, report->is_cuda);
  std::string advice;
  for (const Advice& a : report->advice) {
    absl::StrAppend(&advice, advice.empty() ? "; use " : " or ", AdviceText(a, report->consumer),
                    " (", a.why, ")");
  }
  report->sentence = absl::StrFormat(
      "%s: decided by the what-if measurement: freeing %s gave %.2fx, the most of any stage "
      "(%s)%s; the attribution alone said: %s",
      VerdictClassName(report->verdict), StageName(measured), best->speedup, named, advice,
      report->sentence);
}

}  // namespace sluice
