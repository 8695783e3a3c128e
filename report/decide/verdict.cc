// The verdict of the bottleneck report: its class, the limiting stage and the one sentence
// (docs/bottleneck.md, "Verdict"). Split from bottleneck_report.cc to keep files short.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "report/analysis/bottleneck_report.h"
#include "report/internal/report_internal.h"

namespace sluice {
namespace report_internal {

std::string FormatRate(double samples_per_s) {
  if (samples_per_s >= 1e6) return absl::StrFormat("%.2f M samples/s", samples_per_s / 1e6);
  if (samples_per_s >= 1e3) return absl::StrFormat("%.1f k samples/s", samples_per_s / 1e3);
  return absl::StrFormat("%.0f samples/s", samples_per_s);
}

namespace {

constexpr double kInputBoundPct = 20.0;  // tf.data's thresholds (TF Profiler)
constexpr double kPartlyInputPct = 5.0;
// A device whose step spans lie mostly (this share of its busy time) inside the host's enqueue
// of the same step is waiting for launches, not computing.
constexpr double kLaunchGatedFraction = 0.5;
// CPU compute whose threads' CPU clocks advanced, while a step ran, by less than this share of
// the cores they could use was starved by something outside the run (when it computed nearly
// all the time and the run's own stages did not saturate the cores).
constexpr double kStarvedCoresFraction = 0.75;

// Compute and a pipeline stage whose capacities are this close are a close call: the machine's
// noise (+-25% on a VM) can swap them between identical runs.
constexpr double kCloseCallFraction = 0.15;

// Preprocess limits and decoding takes at least this share of its busy time: decode is named.
constexpr double kDecodeShareOfPreprocess = 0.5;

// The advice that relieves `r`, added to the report, as "do A or B" text in the consumer's
// words; "" when no setting of the run relieves it.
std::string Suggest(const StageRow& r, const RunRecord& run, BottleneckReport* rep) {
  std::vector<Advice> advice =
      AdviceFor(r.stage, r.concurrency, rep->cores, run, rep->on_device, rep->is_cuda);
  std::string text;
  for (const Advice& a : advice) {
    absl::StrAppend(&text, text.empty() ? "use " : " or ", AdviceText(a, rep->consumer), " (",
                    a.why, ")");
    rep->advice.push_back(a);
  }
  return text;
}

// What makes a saturating stage cheaper, for the cpu-bound sentence.
std::string Cheaper(Stage s, const RunRecord& run, const BottleneckReport& rep) {
  switch (s) {
    case Stage::kRead:
      return "keep the shards in the page cache";
    case Stage::kDecompress:
      return FramesAreCompressed(run.pipeline)
                 ? "a lower zstd level: sluice-shard create --zstd-level=1"
                 : "the frames are stored uncompressed, so what is left is their checksum "
                   "and copy";
    case Stage::kPreprocess:
      return rep.on_device ? "u8 batches move normalization to the device" : "a simpler chain";
    case Stage::kDecode: {
      const StageRow& d = rep.row(Stage::kDecode);
      return absl::StrFormat(
          "decoding's cost follows the pixels (%.0f KB decoded per image here): store smaller "
          "images or re-encode them at a lower JPEG quality before ingestion",
          d.samples > 0 ? d.bytes / 1e3 / d.samples : 0.0);
    }
    default:
      return "fewer threads for the other stages";
  }
}

// "close call: decompress or compute are within 15% of each other (...); " when they are.
std::string CloseCall(const StageRow& slow, const StageRow& compute) {
  const double a = slow.capacity_samples_per_s.value_or(0);
  const double b = compute.capacity_samples_per_s.value_or(0);
  if (a <= 0 || b <= 0 || std::abs(a - b) > kCloseCallFraction * std::max(a, b)) return "";
  return absl::StrFormat("close call: %s (%s) or compute (%s), within %.0f%% of each other; ",
                         StageName(slow.stage), FormatRate(a), FormatRate(b),
                         100 * kCloseCallFraction);
}

// "<stage> <lead> 1.2 k samples/s on 2 threads (...)": the row's capacity and where it runs.
std::string StageRunsAt(const StageRow& r, absl::string_view lead) {
  std::string s =
      absl::StrCat(StageName(r.stage), lead, FormatRate(r.capacity_samples_per_s.value_or(0)));
  const ReportStageInfo* info = FindReportStage(r.stage);
  if (info != nullptr && info->track == TraceTrack::kCopyStream) {
    absl::StrAppend(&s, " on the copy stream");
  } else {
    absl::StrAppend(&s, " on ", r.concurrency, r.concurrency == 1 ? " thread" : " threads");
    if (r.cpu_work) absl::StrAppendFormat(&s, " (%.1f cores busy)", r.cores_busy);
  }
  if (r.pct_of_ceiling) absl::StrAppendFormat(&s, " (%.0f%% of its ceiling)", *r.pct_of_ceiling);
  return s;
}

std::string StageAt(const StageRow& r) { return StageRunsAt(r, " is the limit at "); }

// The pipeline stage with the lowest capacity (read, decompress, preprocess, h2d); null if
// the pipeline recorded none.
const StageRow* SlowestPipelineStage(const BottleneckReport& rep) {
  const StageRow* best = nullptr;
  for (const StageRow& r : rep.stages) {
    // Decode is a part of preprocess (DecodeWithin names it).
    if (!r.present || !r.capacity_samples_per_s || r.stage == Stage::kCompute ||
        r.stage == Stage::kDecode) {
      continue;
    }
    if (best == nullptr || *r.capacity_samples_per_s < *best->capacity_samples_per_s) best = &r;
  }
  return best;
}

// The decode row when `slow` is preprocess and decoding is most of its busy time: then decode,
// which runs on the preprocess threads, is the limit. Null otherwise.
const StageRow* DecodeWithin(const BottleneckReport& rep, const StageRow* slow) {
  if (slow == nullptr || slow->stage != Stage::kPreprocess) return nullptr;
  const StageRow& d = rep.row(Stage::kDecode);
  if (!d.present || slow->busy_ns <= 0) return nullptr;
  return d.busy_ns >= kDecodeShareOfPreprocess * slow->busy_ns ? &d : nullptr;
}

// "decode is the limit: it takes 78% of the busy time of preprocess, which runs at ... (its
// threads would decode 2.1 k samples/s doing nothing else, 96% of the bare decoder's rate on as
// many cores)": the limiting stage named first, as in every other verdict.
std::string DecodeAt(const StageRow& decode, const StageRow& preprocess) {
  const std::string at = StageRunsAt(preprocess, ", which runs at ");
  std::string s = absl::StrFormat("decode is the limit: it takes %.0f%% of the busy time of %s",
                                  100.0 * decode.busy_ns / preprocess.busy_ns, at);
  if (decode.capacity_samples_per_s) {
    absl::StrAppend(&s, " (its threads would decode ", FormatRate(*decode.capacity_samples_per_s),
                    " doing nothing else");
    if (decode.pct_of_ceiling) {
      absl::StrAppendFormat(&s, ", %.0f%% of the bare decoder's rate on as many cores",
                            *decode.pct_of_ceiling);
    }
    absl::StrAppend(&s, ")");
  }
  return s;
}

}  // namespace

void DecideVerdict(const RunRecord& run, BottleneckReport* rep) {
  const StageRow& compute = rep->row(Stage::kCompute);
  if (!compute.present || rep->train_seconds <= 0) {
    rep->verdict = VerdictClass::kNoData;
    rep->limiting_stage = Stage::kCompute;
    rep->sentence = "no data: the run trained no steps, so there is nothing to attribute";
    return;
  }
  const double wait = rep->input_bound_pct;
  const std::string waited = absl::StrFormat("compute waited %.0f%% of training time", wait);
  const StageRow* slow = SlowestPipelineStage(*rep);

  // Launch-bound: the host never waited for data, and either the device idled between steps
  // while enqueuing a step took the host longer than the device's step, or most of the device's
  // step time fell while the host was still enqueuing that step (the device reached the step's
  // start event at once and waited for each launch inside it: busy in the events, yet gated
  // by the host). Either way the host's enqueue is the limit.
  const bool idle_between_steps =
      wait >= kPartlyInputPct &&
      rep->compute_host_pct * rep->train_seconds * 1e7 >= compute.busy_ns;
  const bool gated_by_launches =
      compute.busy_pct > 0 && rep->launch_gated_pct >= kLaunchGatedFraction * compute.busy_pct;
  if (rep->on_device && rep->host_wait_pct < kPartlyInputPct && rep->steps > 0 &&
      (idle_between_steps || gated_by_launches)) {
    rep->limiting_stage = Stage::kCompute;
    rep->verdict = VerdictClass::kLaunchBound;
    const double enqueue_us = rep->compute_host_pct / 100 * rep->train_seconds * 1e6 / rep->steps;
    const std::string why =
        idle_between_steps
            ? absl::StrCat(waited, " (the compute stream was idle between steps)")
            : absl::StrFormat(
                  "%.0f%% of the device's step time fell while the host was still enqueuing "
                  "that step (the device waited for its launches)",
                  100 * rep->launch_gated_pct / compute.busy_pct);
    rep->sentence = absl::StrFormat(
        "launch-bound: %s while the host never waited for data; enqueuing a step takes %.1f us "
        "on the host, against %.1f us of device time per step; %s or a larger batch",
        why, enqueue_us, compute.busy_ns / 1e3 / rep->steps, Suggest(compute, run, rep));
    return;
  }
  // CPU compute that takes most of the saturated cores itself: a short wait for input is the
  // pipeline not getting a core in time, not a slow pipeline, so compute is still the limit.
  // (Off device, cpu_threads_busy is the sum of the CPU stages' cores_busy.)
  const bool compute_holds_the_cores = !rep->on_device && compute.cpu_work && rep->cpu_saturated &&
                                       rep->cpu_threads_busy > 0 &&
                                       compute.cores_busy >= 0.5 * rep->cpu_threads_busy;
  if (wait < kPartlyInputPct || slow == nullptr ||
      (wait < kInputBoundPct && compute_holds_the_cores)) {
    rep->limiting_stage = Stage::kCompute;
    rep->verdict = VerdictClass::kComputeBound;
    rep->sentence = absl::StrCat("compute-bound: ", waited, "; ", StageAt(compute));
    if (slow != nullptr) {
      absl::StrAppend(&rep->sentence, "; the pipeline has headroom (slowest stage ",
                      StageName(slow->stage), " could do ",
                      FormatRate(*slow->capacity_samples_per_s), ")");
    }
    // Compute ran nearly all the time, this run's own CPU stages did not fill the cores, yet
    // while a step ran its threads' CPU clocks advanced much less than their count: something
    // outside this run held the cores.
    const double compute_cores = std::min(compute.concurrency, std::max(1, rep->cores));
    const double cores_while_computing =
        compute.busy_ns > 0 ? compute.cpu_ns_per_sample * compute.samples / compute.busy_ns : 0;
    if (compute.cpu_work && compute.busy_pct >= 80 && !rep->cpu_saturated &&
        cores_while_computing > 0 &&
        cores_while_computing < kStarvedCoresFraction * compute_cores) {
      absl::StrAppendFormat(&rep->sentence,
                            "; while computing, its %d %s ran on %.1f cores on average: other "
                            "processes may hold the cores (or the affinity mask or cgroup quota "
                            "is smaller than the threads)",
                            compute.concurrency, compute.concurrency == 1 ? "thread" : "threads",
                            cores_while_computing);
    } else if (!rep->is_cuda && rep->cpu_saturated) {
      absl::StrAppendFormat(&rep->sentence,
                            "; the %d cores are saturated (%.1f threads busy): fewer pipeline "
                            "--threads leave more CPU to compute",
                            rep->cores, rep->cpu_threads_busy);
    } else if (rep->consumer == Consumer::kPython) {
      absl::StrAppend(&rep->sentence,
                      "; your training step is the limit, not the data: a faster step (a larger "
                      "batch, a GPU) raises it");
    } else {
      absl::StrAppend(&rep->sentence,
                      rep->is_cuda     ? "; a larger batch or --precision bf16 raises it"
                      : rep->on_device ? "; a faster device raises it"
                                       : "; no pipeline setting raises it, a faster step would "
                                         "(a larger batch, or a GPU)");
    }
    return;
  }

  rep->verdict =
      wait > kInputBoundPct ? VerdictClass::kInputBound : VerdictClass::kPartlyInputBound;
  rep->limiting_stage = slow->stage;
  const StageRow* decode = DecodeWithin(*rep, slow);
  if (decode != nullptr) rep->limiting_stage = Stage::kDecode;
  const std::string slow_at = decode != nullptr ? DecodeAt(*decode, *slow) : StageAt(*slow);
  if (rep->cpu_saturated && slow->cpu_work) {
    rep->verdict = VerdictClass::kCpuBound;
    double cores = 0;
    for (const StageRow& r : rep->stages) {
      if (r.present && r.cpu_work) cores += r.cores_busy;
    }
    const double share = cores > 0 ? 100.0 * slow->cores_busy / cores : 0;
    rep->sentence = absl::StrFormat(
        "cpu-bound: %s%s and the %d cores are saturated (%.1f threads busy); %s%s %.0f%% of the "
        "CPU time; make %s cheaper (%s): more threads cannot help on %d cores",
        CloseCall(*slow, compute), waited, rep->cores, rep->cpu_threads_busy, slow_at,
        decode != nullptr ? "; preprocess takes" : " and takes", share,
        decode != nullptr ? "decoding" : "it", Cheaper(rep->limiting_stage, run, *rep), rep->cores);
    return;
  }
  // No stage is slower than compute, yet compute starved: the waits are hand-offs between
  // threads (100-200 us each on a loaded VM), not a stage that cannot keep up, and no setting
  // relieved them (a larger pool measured 0.78-1.08x). Compute, the slowest stage, is the
  // limit whatever the wait: between identical runs of this kind it swung from 16% to 53%,
  // across every threshold, and a class that followed it flipped with it.
  const StageRow& pinned = rep->row(Stage::kPinnedWait);
  const double compute_cap = compute.capacity_samples_per_s.value_or(0);
  if (*slow->capacity_samples_per_s > compute_cap) {
    rep->verdict = VerdictClass::kComputeBound;
    rep->limiting_stage = Stage::kCompute;
    rep->sentence = absl::StrFormat(
        "compute-bound: %s; it also waited %.0f%% of training time in hand-offs although every "
        "stage could keep up (slowest, %s, at %s)",
        StageAt(compute), wait, StageName(slow->stage), FormatRate(*slow->capacity_samples_per_s));
    if (rep->pipeline.pool_buffers > 0 && pinned.queue_high_water >= rep->pipeline.pool_buffers) {
      absl::StrAppendFormat(&rep->sentence,
                            "; all %d pinned buffers were in use while batches waited for one",
                            rep->pipeline.pool_buffers);
    }
    absl::StrAppend(&rep->sentence, "; a larger batch amortizes them");
    return;
  }

  const std::string suggestion = Suggest(decode != nullptr ? *decode : *slow, run, rep);
  rep->sentence = absl::StrCat(VerdictClassName(rep->verdict), ": ", CloseCall(*slow, compute),
                               waited, "; ", slow_at, suggestion.empty() ? "" : "; ", suggestion);
  if (decode != nullptr) {
    absl::StrAppend(&rep->sentence, suggestion.empty() ? "; " : ", or make decoding cheaper: ",
                    Cheaper(Stage::kDecode, run, *rep));
  }
}

}  // namespace report_internal
}  // namespace sluice
