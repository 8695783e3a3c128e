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
    case AdviceSetting::kZstdLevel:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", AdviceFlag(a.setting),
                   " is a setting of the dataset (sluice-shard "
                   "create), not of the run: a rerun cannot check it"));
}

absl::StatusOr<std::vector<AdviceCheck>> CheckAdvice(
    Env* env, const TrainJobOptions& base, const std::vector<Advice>& advice, int64_t max_steps,
    int rounds, const std::function<void(const std::string&)>& on_start) {
  std::vector<AdviceCheck> checks;
  const TrainJobOptions before = SpanOptions(base, max_steps);
  for (const Advice& a : advice) {
    AdviceCheck check;
    check.advice = a;
    TrainJobOptions after = before;
    if (absl::Status applied = ApplyAdvice(a, &after); !applied.ok()) {
      check.note = std::string(applied.message());
      checks.push_back(check);
      continue;
    }
    const std::string flag = absl::StrCat("--", AdviceFlag(a.setting), "=", a.value);
    for (int round = 0; round < std::max(1, rounds); ++round) {
      if (on_start) on_start(absl::StrCat("as it was (round ", round + 1, ")"));
      ASSIGN_OR_RETURN(TrainJobResult b, RunTrainJob(env, before));
      if (on_start) on_start(absl::StrCat(flag, " (round ", round + 1, ")"));
      ASSIGN_OR_RETURN(TrainJobResult c, RunTrainJob(env, after));
      check.before_samples_per_s =
          std::max(check.before_samples_per_s, TrainSamplesPerSecond(b.train));
      check.after_samples_per_s =
          std::max(check.after_samples_per_s, TrainSamplesPerSecond(c.train));
    }
    checks.push_back(check);
  }
  return checks;
}

}  // namespace sluice
