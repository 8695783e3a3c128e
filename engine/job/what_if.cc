#include "engine/job/what_if.h"

#include <utility>

#include "common/status_macros.h"

namespace sluice {

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

}  // namespace sluice
