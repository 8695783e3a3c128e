#include "engine/job/what_if.h"

#include <utility>

#include "common/status_macros.h"
#include "report/stages.h"

namespace sluice {

double TrainSamplesPerSecond(const TrainResult& t) {
  return t.train_seconds > 0 ? t.samples / t.train_seconds : 0.0;
}

TrainJobOptions WhatIfOptions(const TrainJobOptions& base, std::optional<Stage> stage) {
  TrainJobOptions o = base;
  o.compute_free = stage == Stage::kCompute;
  o.pipeline.diagnostics.what_if = o.compute_free ? std::nullopt : stage;
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

absl::StatusOr<std::vector<WhatIfRow>> RunWhatIfTable(Env* env, const TrainJobOptions& base,
                                                      const TrainJobResult& normal,
                                                      const std::function<void(Stage)>& on_start) {
  const double normal_rate = TrainSamplesPerSecond(normal.train);
  std::vector<WhatIfRow> rows = {{std::nullopt, "", normal_rate, normal_rate > 0 ? 1.0 : 0.0}};
  for (const StageInfo& info : kStageTable) {
    const Stage stage = info.stage;
    if (!info.what_if) continue;
    if (stage == Stage::kTransforms && base.pipeline.format.transforms.empty()) continue;
    if (stage == Stage::kDecode && normal.run.pipeline[Stage::kDecode].items == 0) continue;
    if (stage == Stage::kH2D && !normal.run.compute.on_device) {
      rows.push_back({stage, "n/a: the CPU backend copies nothing", 0, 0});
      continue;
    }
    if (on_start) on_start(stage);
    ASSIGN_OR_RETURN(TrainJobResult r, RunTrainJob(env, WhatIfOptions(base, stage)));
    const double rate = TrainSamplesPerSecond(r.train);
    rows.push_back({stage, "", rate, normal_rate > 0 ? rate / normal_rate : 0.0});
  }
  return rows;
}

}  // namespace sluice
