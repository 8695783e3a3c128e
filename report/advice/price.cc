#include "report/advice/price.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "pipeline/batch.h"
#include "report/analysis/bottleneck_report.h"

namespace sluice {
namespace {

// The busy time --inject-delay planted in `row`'s stage over the run (its delay per item times
// its items): time no change to the data or the format shrinks.
double InjectedNs(const RunRecord& run, const StageRow& row) {
  double ns = 0;
  for (const auto& [stage, us] : run.injected_delay_us) {
    if (stage == row.stage) ns += static_cast<double>(us) * 1e3 * static_cast<double>(row.items);
  }
  return ns;
}

// A foreign step on the CPU (the Python consumer's: torch's intra-op team, OpenBLAS's threads)
// runs far slower while the pipeline's threads take cores than a fair share of them says: the
// team waits at each barrier for a member the scheduler took off its core. A new user's MLP
// steps took 2.2 ms while the pipeline was idle and 20-90 ms while it worked (issue 34). The
// run's own steps calibrate it: the fastest tenth of the steps is the step alone, and the rest
// of the mean step is taken as proportional to the cores the pipeline kept busy (its CPU time
// per sample times the rate). An alternative that changes either changes the step with it:
// priced with the step's cost so scaled, its rate solved for (the halving of photos whose step
// was mostly this wait was priced 1.36-1.44x and measured 1.72-2.05x).
struct StepContention {
  double alone_ns = 0;         // a step alone: the tenth-fastest percentile of the steps
  double mean_ns = 0;          // the mean step
  double pipeline_cpu_ns = 0;  // the pipeline's CPU time per sample in the run
  double rate = 0;             // the model's rate for the run as it was
};

std::optional<StepContention> ForeignStepContention(const ResourceModel& model,
                                                    const RunRecord& run, double now) {
  const ComputeStats& cs = run.compute;
  constexpr uint64_t kMinSteps = 16;  // fewer: no tenth to speak of
  if (!cs.foreign_step || cs.on_device || cs.steps < kMinSteps || cs.busy_ns <= 0) {
    return std::nullopt;
  }
  StepContention c;
  c.alone_ns = static_cast<double>(cs.step_latency.Quantile(0.1));
  c.mean_ns = static_cast<double>(cs.busy_ns) / static_cast<double>(cs.steps);
  c.rate = now;
  for (Stage s : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    if (const StageCost* cost = model.Find(s)) c.pipeline_cpu_ns += cost->cpu_ns;
  }
  // Steps that barely vary (within the histogram's buckets): nothing to scale.
  if (c.alone_ns <= 0 || c.mean_ns < 1.1 * c.alone_ns || c.pipeline_cpu_ns <= 0) {
    return std::nullopt;
  }
  return c;
}

// The model's rate for `alt` with the step's cost scaled by the pipeline's load at that rate
// (ForeignStepContention): the rate r where Predict, with the step at alone + (mean - alone) x
// (the pipeline's CPU time per sample under alt x r) / (the run's x its rate), gives r back.
double PredictWithStepContention(const ResourceModel& model, Allocation alt,
                                 const StepContention& c) {
  double alt_cpu = 0;
  for (Stage s : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    const StageCost* cost = model.Find(s);
    if (cost == nullptr) continue;
    const auto scale = alt.cost_scale.find(s);
    alt_cpu += cost->cpu_ns * (scale == alt.cost_scale.end() ? 1.0 : std::max(0.0, scale->second));
  }
  const double load = alt_cpu / (c.pipeline_cpu_ns * c.rate);  // per unit of rate
  const auto rate_at = [&](double r) {
    alt.cost_scale[Stage::kCompute] =
        (c.alone_ns + (c.mean_ns - c.alone_ns) * load * r) / c.mean_ns;
    return model.Predict(alt).samples_per_s;
  };
  // Predict(step at r) falls as r rises: bisect Predict(step at r) = r between 0 and the rate
  // with the step alone, to 0.2% (each Predict settles the cores' sharing: the Python
  // consumer prices its advice at every pass's end, inside the user's loop).
  double lo = 0, hi = rate_at(0);
  for (int i = 0; i < 12 && hi - lo > 2e-3 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (rate_at(mid) >= mid ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

std::optional<double> PredictedSpeedup(const Advice& advice, const ResourceModel& model,
                                       const BottleneckReport& report, const RunRecord& run) {
  const double now = model.Predict(model.Current()).samples_per_s;
  if (now <= 0) return std::nullopt;
  Allocation alt = model.Current();
  switch (advice.setting) {
    case AdviceSetting::kDecompressThreads:
    case AdviceSetting::kPreprocessThreads: {
      int threads = 0;
      if (!absl::SimpleAtoi(advice.value, &threads) || threads < 1) return std::nullopt;
      alt.threads[advice.setting == AdviceSetting::kDecompressThreads ? Stage::kDecompress
                                                                      : Stage::kPreprocess] =
          threads;
      break;
    }
    case AdviceSetting::kH2DFormat: {
      // u8 batches: the link carries 1 byte per element instead of 2 or 4, and preprocess's
      // work outside the transform chain (the gather and the conversion, which writes the
      // batch) writes that much less; the normalization moves into the device's step. Only a
      // copy's part that follows its bytes shrinks: the run's copy time is split as the h2d
      // ceiling's copies split (fixed_us_per_item: latency, launch).
      const double bytes = 1.0 / static_cast<double>(H2DFormatSize(run.h2d_format));
      const StageRow& h2d = report.row(Stage::kH2D);
      // Without that ceiling (--ceilings=false, a Python loader) the link keeps its cost and
      // only preprocess's part is priced.
      if (h2d.present && h2d.busy_ns > 0 && report.ceilings &&
          report.ceilings->h2d_pinned.measured && report.ceilings->h2d_pinned.items_per_s > 0) {
        const Ceiling& link = report.ceilings->h2d_pinned;
        const double fixed = std::clamp(link.fixed_us_per_item * 1e-6 * link.items_per_s, 0.0, 1.0);
        // A delay --inject-delay planted in each copy stays too.
        const double busy = static_cast<double>(h2d.busy_ns);
        const double planted = std::clamp(InjectedNs(run, h2d), 0.0, busy) / busy;
        alt.cost_scale[Stage::kH2D] = planted + (1 - planted) * (fixed + (1 - fixed) * bytes);
      }
      const StageRow& pre = report.row(Stage::kPreprocess);
      if (pre.busy_ns > 0) {
        const double busy = static_cast<double>(pre.busy_ns);
        const double outside = std::clamp(
            busy * pre.outside_chain_pct.value_or(100) / 100 - InjectedNs(run, pre), 0.0, busy);
        alt.cost_scale[Stage::kPreprocess] = 1 - outside / busy * (1 - bytes);
      }
      break;
    }
    case AdviceSetting::kBatchSize: {
      // The link's time per sample: each copy's fixed part (the h2d ceiling's, as for u8
      // batches) paid once per batch, the rest per byte. The device's step and the pipeline
      // keep their cost per sample (a larger batch is rarely dearer per sample, often
      // cheaper: a bound from below). Without that ceiling, not priced.
      uint32_t batch = 0;
      const StageRow& h2d = report.row(Stage::kH2D);
      if (!absl::SimpleAtoi(advice.value, &batch) || run.batch_size == 0 || batch == 0 ||
          !h2d.present || h2d.busy_ns <= 0 || !report.ceilings ||
          !report.ceilings->h2d_pinned.measured || report.ceilings->h2d_pinned.items_per_s <= 0) {
        return std::nullopt;
      }
      const Ceiling& link = report.ceilings->h2d_pinned;
      const double fixed = std::clamp(link.fixed_us_per_item * 1e-6 * link.items_per_s, 0.0, 1.0);
      const double busy = static_cast<double>(h2d.busy_ns);
      const double planted = std::clamp(InjectedNs(run, h2d), 0.0, busy) / busy;
      const double per_batch = static_cast<double>(run.batch_size) / batch;
      alt.cost_scale[Stage::kH2D] =
          (planted + (1 - planted) * fixed) * per_batch + (1 - planted) * (1 - fixed);
      break;
    }
    case AdviceSetting::kCudaGraph:
      // One launch per step: the enqueue's host time all but vanishes; the device's own time
      // stays. An upper bound on the gain.
      alt.host_scale[Stage::kCompute] = 0;
      break;
    case AdviceSetting::kImageSide: {
      double side = 0;
      if (!absl::SimpleAtod(advice.value, &side) || side <= 0 || side > 1) return std::nullopt;
      const StageRow& decode = report.row(Stage::kDecode);
      const StageRow& pre = report.row(Stage::kPreprocess);
      if (!decode.present || pre.busy_ns <= 0) return std::nullopt;
      // Decoding's cost follows the pixels; the rest of preprocess stays, and so does a delay
      // --inject-delay planted in each decode.
      const double pixels_ns = static_cast<double>(decode.busy_ns) - InjectedNs(run, decode);
      const double share = std::clamp(pixels_ns / pre.busy_ns, 0.0, 1.0);
      alt.cost_scale[Stage::kPreprocess] = 1 - share * (1 - side * side);
      break;
    }
    case AdviceSetting::kReadAhead:
    case AdviceSetting::kDeviceRingDepth:
      // A wait the model does not hold: the stage waited downstream for a frame or a slot.
      // Relieved, the run reaches the model's rate.
      if (report.measured_samples_per_s <= 0) return std::nullopt;
      return now / report.measured_samples_per_s;
    case AdviceSetting::kPoolSize:
    case AdviceSetting::kZstdLevel:
      return std::nullopt;
  }
  if (const std::optional<StepContention> c = ForeignStepContention(model, run, now)) {
    return PredictWithStepContention(model, alt, *c) / now;
  }
  return model.Predict(alt).samples_per_s / now;
}

}  // namespace sluice
