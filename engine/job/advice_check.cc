#include "engine/job/advice_check.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/job/what_if.h"

namespace sluice {
namespace {

absl::StatusOr<uint32_t> Count(const Advice& a) {
  uint32_t n = 0;
  if (!absl::SimpleAtoi(a.value, &n) || n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("advice --", AdviceFlag(a.setting), ": not a count: '", a.value, "'"));
  }
  return n;
}

// The bounded span of a check: the job as it was, no outputs, one epoch, `max_steps` steps.
TrainJobOptions SpanOptions(const TrainJobOptions& base, int64_t max_steps) {
  TrainJobOptions o = WhatIfOptions(base, std::nullopt);
  o.epochs = 1;
  o.stop_after_steps = max_steps;
  o.autotune = false;
  o.report_every_steps = 0;
  return o;
}

}  // namespace

absl::Status ApplyAdvice(const Advice& a, TrainJobOptions* o) {
  PipelineResources& r = o->pipeline.resources;
  switch (a.setting) {
    case AdviceSetting::kReadAhead: {
      ASSIGN_OR_RETURN(r.read_ahead_frames, Count(a));
      return absl::OkStatus();
    }
    case AdviceSetting::kReadConcurrency: {
      ASSIGN_OR_RETURN(r.read_concurrency, Count(a));
      return absl::OkStatus();
    }
    case AdviceSetting::kDecompressThreads: {
      ASSIGN_OR_RETURN(uint32_t n, Count(a));
      r.decompress_threads = static_cast<int>(n);
      r.threads = std::max(r.threads, r.decompress_threads);
      return absl::OkStatus();
    }
    case AdviceSetting::kPreprocessThreads: {
      ASSIGN_OR_RETURN(uint32_t n, Count(a));
      r.preprocess_threads = static_cast<int>(n);
      r.threads = std::max(r.threads, r.preprocess_threads);
      return absl::OkStatus();
    }
    case AdviceSetting::kPoolSize: {
      ASSIGN_OR_RETURN(r.pool_size, Count(a));
      return absl::OkStatus();
    }
    case AdviceSetting::kDeviceRingDepth: {
      ASSIGN_OR_RETURN(r.device_ring_depth, Count(a));
      return absl::OkStatus();
    }
    case AdviceSetting::kH2DFormat: {
      ASSIGN_OR_RETURN(o->pipeline.format.h2d_format, ParseH2DFormat(a.value));
      return absl::OkStatus();
    }
    case AdviceSetting::kCudaGraph:
      o->backend.cuda.cuda_graph = a.value == "true";
      return absl::OkStatus();
    case AdviceSetting::kBatchSize: {
      ASSIGN_OR_RETURN(o->pipeline.order.batch_size, Count(a));
      return absl::OkStatus();
    }
    case AdviceSetting::kZstdLevel:
    case AdviceSetting::kImageSide:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a change to the dataset (sluice-shard create), not to the run: a rerun "
                   "cannot check it"));
}

absl::StatusOr<std::vector<AdviceCheck>> CheckAdvice(
    Env* env, const TrainJobOptions& base, const std::vector<Advice>& advice, int64_t max_steps,
    int rounds, const std::function<void(const std::string&)>& on_start) {
  const TrainJobOptions before = SpanOptions(base, max_steps);
  const AdviceNotRun not_run = [&before](const Advice& a) {
    TrainJobOptions after = before;
    const absl::Status applied = ApplyAdvice(a, &after);
    return applied.ok() ? std::string() : std::string(applied.message());
  };
  const AdviceSpan span = [&](const Advice* change, int round) -> absl::StatusOr<double> {
    TrainJobOptions options = before;
    std::string label = "as it was";
    if (change != nullptr) {
      RETURN_IF_ERROR(ApplyAdvice(*change, &options));
      label = absl::StrCat("--", AdviceFlag(change->setting), "=", change->value);
    }
    if (on_start) on_start(absl::StrCat(label, " (round ", round + 1, ")"));
    ASSIGN_OR_RETURN(TrainJobResult result, RunTrainJob(env, options));
    return TrainSamplesPerSecond(result.train);
  };
  return RerunAdvice(advice, rounds, not_run, span);
}

}  // namespace sluice
