// A sluice run's verdict from its rows (docs/bottleneck.md, "Verdict"): launch-bound,
// compute-bound, or limited by a pipeline stage (input-bound, partly, or cpu-bound when that
// stage's CPU time saturates the cores).
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/decide/internal/verdicts.h"
#include "report/decide/thresholds.h"
#include "report/format.h"
#include "report/stages.h"

namespace sluice::decide_internal {
namespace {

using namespace verdict_thresholds;  // NOLINT: the thresholds, by their names

// What makes a saturating stage cheaper, for the cpu-bound sentence.
std::string Cheaper(Stage s, const BottleneckReport& a) {
  switch (s) {
    case Stage::kRead:
      return "keep the shards in the page cache";
    case Stage::kDecompress:
      // Not a lower zstd level: decompression's speed barely follows the level.
      return FramesAreCompressed(a.pipeline)
                 ? "fewer bytes per sample: decompression's cost follows the bytes it writes"
                 : "the frames are stored uncompressed, so what is left is their checksum "
                   "and copy";
    case Stage::kPreprocess:
      return a.on_device ? "u8 batches move normalization to the device" : "a simpler chain";
    case Stage::kDecode: {
      const StageRow& d = a.row(Stage::kDecode);
      return absl::StrFormat(
          "decoding's cost follows the pixels (%.0f KB decoded per image here): store smaller "
          "images or re-encode them at a lower JPEG quality before ingestion",
          d.samples > 0 ? d.bytes / 1e3 / d.samples : 0.0);
    }
    default:
      return "fewer threads for the other stages";
  }
}

// The stage the resource model's binding bound names: a stage's own threads or the largest
// consumer of the shared cores; h2d for the link, compute for the device. Compute when the
// model holds nothing.
Stage ModelLimit(const BottleneckReport& a) {
  if (a.model.bounds.empty()) return Stage::kCompute;
  switch (a.model.binding.constraint) {
    case Constraint::kLink:
      return Stage::kH2D;
    case Constraint::kDevice:
      return Stage::kCompute;
    case Constraint::kStage:
    case Constraint::kSharedCpu:
      return a.model.binding.stage;
  }
  return Stage::kCompute;
}

// The model's starvation of `s` (BottleneckReport::starved_pct); 0 when not modelled.
double StarvedPct(const BottleneckReport& a, Stage s) {
  for (const auto& [stage, pct] : a.starved_pct) {
    if (stage == s) return pct;
  }
  return 0;
}

// `s`'s share of the CPU time per sample of the run's CPU stages, in [0, 100]: the resource
// model's (ResourceModel::CpuSharePct); 0 without a model.
double CpuSharePct(const BottleneckReport& a, Stage s) {
  return a.resource_model ? a.resource_model->CpuSharePct(s) : 0;
}

// The pipeline stage with the lowest capacity (read, decompress, preprocess, h2d); null if
// the pipeline recorded none. A part of a stage (decode) is not one (PartWithin names it).
const StageRow* SlowestPipelineStage(const BottleneckReport& a) {
  const StageRow* best = nullptr;
  for (const StageRow& r : a.stages) {
    if (!r.present || !r.capacity_samples_per_s || r.stage == Stage::kCompute || PartOf(r.stage)) {
      continue;
    }
    if (best == nullptr || *r.capacity_samples_per_s < *best->capacity_samples_per_s) best = &r;
  }
  return best;
}

// The row of a part of `slow` (StageInfo::part_of: decode inside preprocess) that takes most of
// its busy time, when one takes at least kPartShareOfStage of it: then that part, which runs on
// `slow`'s threads, is the limit. Null otherwise.
const StageRow* PartWithin(const BottleneckReport& a, const StageRow* slow) {
  if (slow == nullptr || slow->busy_ns <= 0) return nullptr;
  const StageRow* best = nullptr;
  for (const StageRow& r : a.stages) {
    if (!r.present || PartOf(r.stage) != slow->stage) continue;
    if (r.busy_ns >= kPartShareOfStage * slow->busy_ns &&
        (best == nullptr || r.busy_ns > best->busy_ns)) {
      best = &r;
    }
  }
  return best;
}

// "decode is the limit: it takes 78% of the busy time of preprocess, which runs at ... (its
// threads would do 2.1 k samples/s of it doing nothing else, 96% of its ceiling on as many
// cores)": the limiting stage named first, as in every other verdict.
std::string PartAt(const StageRow& part, const StageRow& whole) {
  const std::string at = StageRunsAt(whole, ", which runs at ");
  std::string s = absl::StrFormat("%s is the limit: it takes %.0f%% of the busy time of %s",
                                  StageName(part.stage), 100.0 * part.busy_ns / whole.busy_ns, at);
  if (part.capacity_samples_per_s) {
    absl::StrAppend(&s, " (its threads would do ", FormatRate(*part.capacity_samples_per_s),
                    " of it doing nothing else");
    if (part.pct_of_ceiling) {
      absl::StrAppendFormat(&s, ", %.0f%% of its ceiling on as many cores", *part.pct_of_ceiling);
    }
    absl::StrAppend(&s, ")");
  }
  return s;
}

// Launch-bound: the host never waited for data, and either the device idled between steps
// while enqueuing a step took the host longer than the device's step, or most of the device's
// step time fell while the host was still enqueuing that step (the device waited for each
// launch inside it). Either way the host's enqueue is the limit. False when not launch-bound.
bool LaunchBound(const BottleneckReport& a, const RunRecord* run, Verdict* v) {
  const StageRow& compute = a.row(Stage::kCompute);
  const double wait = a.input_bound_pct;
  const bool idle_between_steps =
      wait >= kPartlyInputPct && a.compute_host_pct * a.train_seconds * 1e7 >= compute.busy_ns;
  const bool gated_by_launches =
      compute.busy_pct > 0 && a.launch_gated_pct >= kLaunchGatedFraction * compute.busy_pct;
  if (!a.on_device || a.host_wait_pct >= kPartlyInputPct || a.steps == 0 ||
      !(idle_between_steps || gated_by_launches)) {
    return false;
  }
  v->limiting_stage = Stage::kCompute;
  v->verdict = VerdictClass::kLaunchBound;
  const double enqueue_us = a.compute_host_pct / 100 * a.train_seconds * 1e6 / a.steps;
  const std::string why =
      idle_between_steps
          ? absl::StrCat(Waited(wait), " (the compute stream was idle between steps)")
          : absl::StrFormat(
                "%.0f%% of the device's step time fell while the host was still enqueuing "
                "that step (the device waited for its launches)",
                100 * a.launch_gated_pct / compute.busy_pct);
  const Suggestion suggestion = Suggest(compute, a, run, v);
  v->sentence = absl::StrFormat(
      "launch-bound: %s while the host never waited for data; enqueuing a step takes %.1f us "
      "on the host, against %.1f us of device time per step; %s%sa larger batch raises it",
      why, enqueue_us, compute.busy_ns / 1e3 / a.steps, suggestion.text,
      suggestion.text.empty() ? "" : "; ");
  return true;
}

// Cores held by the pipeline or by other processes, at least this many, are named as what
// held compute's threads off the cores, when with compute's they fill this share of the cores.
constexpr double kHeldCoresNoted = 0.2;
constexpr double kHeldCoresShare = 0.7;

// What raises a compute-bound run: a starved compute, saturated cores, or a faster step.
std::string ComputeBoundHint(const BottleneckReport& a) {
  const StageRow& compute = a.row(Stage::kCompute);
  // Compute ran nearly all the time, this run's own CPU stages did not fill the cores, yet
  // while a step ran its threads' CPU clocks advanced much less than their count: something
  // outside this run held the cores.
  const double compute_cores = std::min(compute.concurrency, std::max(1, a.cores));
  const double cores_while_computing =
      compute.busy_ns > 0 ? compute.cpu_ns_per_sample * compute.samples / compute.busy_ns : 0;
  if (compute.cpu_work && compute.busy_pct >= 80 && !a.cpu_saturated && cores_while_computing > 0 &&
      cores_while_computing < kStarvedCoresFraction * compute_cores) {
    const std::string ran = absl::StrFormat(
        "; while computing, its %d %s ran on %.1f cores on average: ", compute.concurrency,
        compute.concurrency == 1 ? "thread" : "threads", cores_while_computing);
    // Who held the other cores, where it was measured: this run's own pipeline threads, or
    // other processes.
    const double pipeline_cores = std::max(0.0, a.cpu_threads_busy - compute.cores_busy);
    const double others = a.other_cores_busy.value_or(0);
    if (pipeline_cores >= kHeldCoresNoted && pipeline_cores >= others &&
        pipeline_cores + cores_while_computing >= kHeldCoresShare * a.cores) {
      return absl::StrFormat(
          "%sthis run's pipeline threads kept %.1f cores busy meanwhile (they share the %d "
          "cores with compute)",
          ran, pipeline_cores, a.cores);
    }
    if (others >= kHeldCoresNoted &&
        others + pipeline_cores + cores_while_computing >= kHeldCoresShare * a.cores) {
      return absl::StrFormat("%sother processes kept %.1f of the %d cores busy meanwhile", ran,
                             others, a.cores);
    }
    // This process's own CPU time beyond its timed stages (measured: the process's clock over
    // the span): hand-offs between the stages, threads waiting for work. On 2 idle cores, other
    // processes 0.01: a batch of 1 kept 2.0 cores busy, 0.6-0.7 of them outside the stages;
    // batch 32 1.9, 0.3-0.6 (2026-12-07), so not a cost per step alone.
    const double compute_cores_busy = cores_while_computing * compute.busy_pct / 100;
    const double own_rest =
        a.process_cores_busy > 0
            ? std::max(0.0, a.process_cores_busy - compute_cores_busy - pipeline_cores)
            : 0;
    if (own_rest >= kHeldCoresNoted && own_rest >= others &&
        own_rest + pipeline_cores + cores_while_computing >= kHeldCoresShare * a.cores) {
      return absl::StrFormat(
          "%sthis process kept %.1f of the %d cores busy, %.1f of them outside the stages it "
          "times (between the stages: hand-offs, threads waiting for work)",
          ran, a.process_cores_busy, a.cores, own_rest);
    }
    if (a.other_cores_busy.has_value() && a.process_cores_busy > 0) {
      // Measured: neither this process nor others filled the cores, so compute's threads were
      // off the cores waiting (on each other, on a lock), not for a core.
      return absl::StrFormat(
          "%sthe cores were not full (this process %.1f, other processes %.1f of %d): its "
          "threads waited off the cores (on each other or on locks), not for a core",
          ran, a.process_cores_busy, others, a.cores);
    }
    return absl::StrCat(ran,
                        "other processes may hold the cores (or the affinity mask or cgroup "
                        "quota is smaller than the threads)");
  }
  if (!a.is_cuda && a.cpu_saturated) {
    // Fewer pipeline threads do not raise it: the stages' CPU time per sample is the same on
    // fewer threads (measured 0.97x), so the model's shared-core bound does not move.
    return absl::StrFormat(
        "; the %d cores are saturated (%.1f cores busy), compute taking %.0f%% of the CPU time "
        "per sample: a faster step raises it (a larger batch, or a GPU), fewer pipeline "
        "threads do not",
        a.cores, a.cpu_threads_busy, CpuSharePct(a, Stage::kCompute));
  }
  if (a.consumer == Consumer::kPython) {
    return "; your training step is the limit, not the data: a faster step (a larger batch, a "
           "GPU) raises it";
  }
  return a.is_cuda     ? "; a larger batch or --precision bf16 raises it"
         : a.on_device ? "; a faster device raises it"
                       : "; no pipeline setting raises it, a faster step would (a larger batch, "
                         "or a GPU)";
}

// Compute binds through the cores it shares with the pipeline (the resource model's shared-CPU
// bound, compute its largest consumer): the pipeline's own largest consumer of the cores (the
// decode inside preprocess where it takes most of it) gives cores back to compute when it gets
// cheaper, so its advice is priced by the model like any other (a new user's tiny CNN on 2
// cores, decode about half the CPU: "compute-bound" with no advice, while half-side images
// measured 1.4x). Null when the cores do not bind or no pipeline stage uses them.
const StageRow* LargestPipelineCpuUser(const BottleneckReport& a) {
  if (a.on_device || !a.resource_model || a.model.binding.constraint != Constraint::kSharedCpu) {
    return nullptr;
  }
  const StageRow* best = nullptr;
  for (const Stage s : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    const StageRow& r = a.row(s);
    if (!r.present || !r.cpu_work || CpuSharePct(a, s) <= 0) continue;
    if (best == nullptr || CpuSharePct(a, s) > CpuSharePct(a, best->stage)) best = &r;
  }
  if (best == nullptr) return nullptr;
  const StageRow* part = PartWithin(a, best);
  return part != nullptr ? part : best;
}

Verdict ComputeBound(const BottleneckReport& a, const RunRecord* run, const StageRow* slow) {
  Verdict v;
  v.limiting_stage = Stage::kCompute;
  v.verdict = VerdictClass::kComputeBound;
  v.sentence = absl::StrCat("compute-bound: ", Waited(a.input_bound_pct), "; ",
                            StageAt(a.row(Stage::kCompute)));
  // Compute binds through the cores it shares with the pipeline: the pipeline's largest user of
  // them, cheaper, gives compute cores. Said as that, with its priced advice, in place of the
  // pipeline's headroom (its own threads could do more, beside the point where the cores bind)
  // and of "a faster step raises it" (a new user read the two together as a contradiction).
  if (const StageRow* user = LargestPipelineCpuUser(a); user != nullptr) {
    const Stage whole = PartOf(user->stage).value_or(user->stage);
    const Suggestion suggestion = Suggest(*user, a, run, &v);
    if (!v.advice.empty()) {
      absl::StrAppendFormat(
          &v.sentence,
          "; compute and the pipeline share the %d cores, and the cores bind (the resource "
          "model): compute takes %.0f%% of the CPU time per sample, %s %.0f%%%s, so a cheaper "
          "%s gives compute cores: %s",
          a.cores, CpuSharePct(a, Stage::kCompute), StageName(whole), CpuSharePct(a, whole),
          whole == user->stage ? "" : absl::StrCat(" (most of it in ", StageName(user->stage), ")"),
          StageName(user->stage), suggestion.text);
      return v;
    }
  }
  if (slow != nullptr) {
    absl::StrAppend(&v.sentence, "; the pipeline has headroom (slowest stage ",
                    StageName(slow->stage), " could do ", FormatRate(*slow->capacity_samples_per_s),
                    ")");
  }
  absl::StrAppend(&v.sentence, ComputeBoundHint(a));
  return v;
}

// No stage is slower than compute, yet compute starved: the waits are hand-offs between
// threads (100-200 us each on a loaded VM), not a stage that cannot keep up, and no setting
// relieved them (a larger pool measured 0.78-1.08x). Compute, the slowest stage, is the limit
// whatever the wait: between identical runs of this kind it swung from 16% to 53%, across every
// threshold, and a class that followed it flipped with it.
Verdict HandOffs(const BottleneckReport& a, const StageRow& slow) {
  Verdict v;
  v.verdict = VerdictClass::kComputeBound;
  v.limiting_stage = Stage::kCompute;
  v.sentence = absl::StrFormat(
      "compute-bound: %s; it also waited %.0f%% of training time in hand-offs although every "
      "stage could keep up (slowest, %s, at %s)",
      StageAt(a.row(Stage::kCompute)), a.input_bound_pct, StageName(slow.stage),
      FormatRate(*slow.capacity_samples_per_s));
  const StageRow& pinned = a.row(Stage::kPinnedWait);
  if (a.pipeline.pool_buffers > 0 && pinned.queue_high_water >= a.pipeline.pool_buffers) {
    absl::StrAppendFormat(&v.sentence,
                          "; all %d pinned buffers were in use while batches waited for one",
                          a.pipeline.pool_buffers);
  }
  absl::StrAppend(&v.sentence, "; a larger batch amortizes them");
  return v;
}

// A pipeline stage (`slow`, or the decode inside it) limits the run; `shared_cpu`: through the
// cores it shares with the other stages (the resource model's binding bound), not its own
// threads.
Verdict StageLimits(const BottleneckReport& a, const RunRecord* run, const StageRow& slow,
                    bool shared_cpu) {
  const double wait = a.input_bound_pct;
  Verdict v;
  v.verdict = wait > kInputBoundPct ? VerdictClass::kInputBound : VerdictClass::kPartlyInputBound;
  v.limiting_stage = slow.stage;
  const StageRow* part = PartWithin(a, &slow);
  if (part != nullptr) v.limiting_stage = part->stage;
  const std::string slow_at = part != nullptr ? PartAt(*part, slow) : StageAt(slow);
  const Suggestion suggestion = Suggest(part != nullptr ? *part : slow, a, run, &v);
  if (shared_cpu && slow.cpu_work) {
    v.verdict = VerdictClass::kCpuBound;
    const double starved = StarvedPct(a, Stage::kCompute);
    v.sentence = absl::StrFormat(
        "cpu-bound: %s%s; the %d cores bind at %s (the resource model; measured %s): %s; %s "
        "takes %.0f%% of the CPU time per sample%s",
        CloseCall(a), Waited(wait), a.cores, FormatRate(a.model.samples_per_s),
        FormatRate(a.measured_samples_per_s), slow_at, StageName(slow.stage),
        CpuSharePct(a, slow.stage),
        starved >= kStarvedPct
            ? absl::StrFormat(", so compute's threads waited for a core %.0f%% of their step time",
                              starved)
            : "");
    if (!v.advice.empty()) {
      absl::StrAppend(&v.sentence, "; ", suggestion.text);
    } else {
      absl::StrAppendFormat(&v.sentence,
                            "; make %s cheaper (%s): more threads cannot help on %d cores",
                            StageName(v.limiting_stage), Cheaper(v.limiting_stage, a), a.cores);
    }
    return v;
  }
  v.sentence = absl::StrCat(VerdictClassName(v.verdict), ": ", CloseCall(a), Waited(wait), "; ",
                            slow_at, suggestion.text.empty() ? "" : "; ", suggestion.text);
  if (part != nullptr && !suggestion.data_change) {
    absl::StrAppend(&v.sentence, v.advice.empty() ? "; make " : ", or make ",
                    StageName(part->stage), " cheaper: ", Cheaper(part->stage, a));
  }
  return v;
}

}  // namespace

Verdict RunVerdict(const BottleneckReport& a, const RunRecord* run) {
  Verdict v;
  const StageRow& compute = a.row(Stage::kCompute);
  if (!compute.present || a.train_seconds <= 0) {
    v.sentence = "no data: the run trained no steps, so there is nothing to attribute";
    return v;
  }
  if (LaunchBound(a, run, &v)) return v;
  const StageRow* slow = SlowestPipelineStage(a);
  const double wait = a.input_bound_pct;
  // The resource model names the limit: the stage whose own threads bind, the largest consumer
  // of the shared cores, the link (h2d) or the device (compute).
  const Stage limit = ModelLimit(a);
  const StageRow* limiting = FindReportRow(limit) < 0 ? nullptr : &a.row(limit);
  if (limit == Stage::kCompute || limiting == nullptr || !limiting->present ||
      !limiting->capacity_samples_per_s) {
    // Compute binds. Through its own threads, a wait beside it is hand-offs between threads,
    // not a slow stage; through the cores it holds most of, the wait is the pipeline getting a
    // core late (ComputeBound says the cores are saturated).
    if (wait >= kPartlyInputPct && slow != nullptr &&
        a.model.binding.constraint != Constraint::kSharedCpu) {
      return HandOffs(a, *slow);
    }
    return ComputeBound(a, run, slow);
  }
  // A pipeline stage binds, yet compute neither waited nor was kept from its cores: the run's
  // own measurement disagrees with the model, and the measurement wins.
  const bool compute_starved = compute.cpu_work && StarvedPct(a, Stage::kCompute) >= kStarvedPct;
  if (wait < kPartlyInputPct && !compute_starved) return ComputeBound(a, run, slow);
  return StageLimits(a, run, *limiting, a.model.binding.constraint == Constraint::kSharedCpu);
}

}  // namespace sluice::decide_internal
