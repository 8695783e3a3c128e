#include "report/advice/price.h"

#include <algorithm>
#include <cmath>

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

// The share of a decode's time that follows the image's size, from the line through the run's
// images' (whole size, decode time) pairs (PipelineStats::decode_cost_fit): its intercept is
// paid per image whatever its size (the decoder's set-up, the headers, the buffers; and a delay
// --inject-delay planted in each decode). None with fewer than 64 images, sizes that vary by
// less than a tenth (the line is then the noise's), or a line that does not rise. A new user's
// 2,400 photos (452 px on average, 92-353 k pixels) decoded in 492 us of CPU time each and at
// half their side in 153 us, not the quarter of it that pixels alone predict.
std::optional<double> DecodeSizeShare(const PipelineStats::DecodeCostFit& f) {
  constexpr double kMinImages = 64, kMinSpread = 0.1;
  if (f.n < kMinImages) return std::nullopt;
  const double mean_x = f.sum_x / f.n, mean_y = f.sum_y / f.n;
  const double var_x = f.sum_xx / f.n - mean_x * mean_x;
  if (mean_x <= 0 || mean_y <= 0 || var_x < kMinSpread * kMinSpread * mean_x * mean_x) {
    return std::nullopt;
  }
  const double slope = (f.sum_xy / f.n - mean_x * mean_y) / var_x;
  if (slope <= 0) return std::nullopt;
  return std::clamp(slope * mean_x / mean_y, 0.0, 1.0);
}

// A foreign step on the CPU (the Python consumer's: torch's intra-op team, OpenBLAS's threads)
// runs far slower while the pipeline's threads take cores than a fair share of them says: the
// team waits at each barrier for a member the scheduler took off its core. A new user's MLP
// steps took 2.2 ms while the pipeline was idle and 20-90 ms while it worked (issue 34). The
// run's own steps calibrate it: the fastest tenth of the steps is the step alone, and the rest
// of the mean step (its wait) grows as the square of the cores the pipeline keeps busy (its
// CPU time per sample times the rate). The power is fitted on two loops, neither of which it
// fits alone (docs/bottleneck.md, "A Python step slowed by the pipeline"): one over real
// photographs at full, half and quarter side waited 16.7, 6.4 and 2.1 ms a step beyond 2.3 ms
// alone as the pipeline kept 1.73, 1.25 and 0.90 of 2 cores busy (a power near 3), one with a
// smaller step over generated photos waited 5.6, 2.6 and 2.1 ms at 1.58, 0.88 and 0.41 cores
// (near 1). Priced with 2, both loops' first halvings measured 1-5% off and their second
// halvings 12-17% under and 28-34% over (0.2 s passes, unsteady); with 3, one first halving
// was 39% over; with 1, the other 19% under. The step's wall time bounds the rate: the loop runs
// one step at a time.
struct StepContention {
  double alone_ns = 0;          // a step alone: the tenth-fastest percentile of the steps
  double mean_ns = 0;           // the mean step
  double samples_per_step = 0;  // the run's
  double pipeline_cores = 0;    // the cores the pipeline kept busy: CPU time per sample x rate
};
constexpr double kStepWaitPower = 2;

std::optional<StepContention> ForeignStepContention(const ResourceModel& model,
                                                    const RunRecord& run, double now) {
  const ComputeStats& cs = run.compute;
  constexpr uint64_t kMinSteps = 16;  // fewer: no tenth to speak of
  if (!cs.foreign_step || cs.on_device || cs.steps < kMinSteps || cs.busy_ns <= 0 ||
      cs.samples == 0) {
    return std::nullopt;
  }
  StepContention c;
  c.alone_ns = static_cast<double>(cs.step_latency.Quantile(0.1));
  c.mean_ns = static_cast<double>(cs.busy_ns) / static_cast<double>(cs.steps);
  c.samples_per_step = static_cast<double>(cs.samples) / static_cast<double>(cs.steps);
  double pipeline_cpu_ns = 0;
  for (Stage s : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    if (const StageCost* cost = model.Find(s)) pipeline_cpu_ns += cost->cpu_ns;
  }
  c.pipeline_cores = pipeline_cpu_ns * 1e-9 * now;
  // Steps that barely vary (within the histogram's buckets): nothing to scale.
  if (c.alone_ns <= 0 || c.mean_ns < 1.1 * c.alone_ns || c.pipeline_cores <= 0) {
    return std::nullopt;
  }
  return c;
}

// The model's rate for `alt` with the step's time moved by the pipeline's load at that rate
// (ForeignStepContention): the rate r where the step takes alone + (mean - alone) x (the cores
// the pipeline keeps busy under alt at r / the run's) ^ 2, and Predict with the step's cost
// scaled as its time, or the step's time itself, gives r back.
double PredictWithStepContention(const ResourceModel& model, Allocation alt,
                                 const StepContention& c) {
  double alt_cpu = 0;
  for (Stage s : {Stage::kRead, Stage::kDecompress, Stage::kPreprocess}) {
    const StageCost* cost = model.Find(s);
    if (cost == nullptr) continue;
    const auto scale = alt.cost_scale.find(s);
    alt_cpu += cost->cpu_ns * (scale == alt.cost_scale.end() ? 1.0 : std::max(0.0, scale->second));
  }
  const auto rate_at = [&](double r) {
    const double load = alt_cpu * 1e-9 * r / c.pipeline_cores;
    const double step = c.alone_ns + (c.mean_ns - c.alone_ns) * std::pow(load, kStepWaitPower);
    alt.cost_scale[Stage::kCompute] = step / c.mean_ns;
    return std::min(model.Predict(alt).samples_per_s, c.samples_per_step * 1e9 / step);
  };
  // rate_at falls as r rises: bisect rate_at(r) = r between 0 and the rate with the step
  // alone, to 0.2% (each Predict settles the cores' sharing: the Python consumer prices its
  // advice at every pass's end, inside the user's loop).
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
      // A decode's part paid per image (DecodeSizeShare) stays too, where the run's images
      // vary enough in size to tell it.
      const double busy = static_cast<double>(decode.busy_ns);
      double pixels_ns = busy - InjectedNs(run, decode);
      if (const std::optional<double> share = DecodeSizeShare(run.pipeline.decode_cost_fit)) {
        pixels_ns = std::min(pixels_ns, busy * *share);
      }
      const double share = std::clamp(pixels_ns / pre.busy_ns, 0.0, 1.0);
      alt.cost_scale[Stage::kPreprocess] = 1 - share * (1 - side * side);
      break;
    }
    case AdviceSetting::kReadConcurrency: {
      // The reader waits for ranges fetched several at a time: a latency-bound store answers
      // requests in proportion to those in flight (Little's law), so the read's time off the
      // CPU (its wait for the network) scales by the requests in flight now over those after:
      // the mean measured, plus the ranges added (the frame being read, fetched beside the
      // hinted ones, stays). Its CPU time stays. An upper bound: the server's bandwidth may cap
      // it first. (The diagnosis benchmark's case at 2, before: 1.98x predicted by the set
      // values' ratio, 1.65x measured.)
      const StageCost* read = model.Find(Stage::kRead);
      uint64_t after = 0;
      if (read == nullptr || run.read_concurrency == 0 || !absl::SimpleAtoi(advice.value, &after) ||
          after <= run.read_concurrency) {
        return std::nullopt;
      }
      const double total = read->cpu_ns + read->blocked_ns;
      if (total <= 0) return std::nullopt;
      const double now_in_flight = run.network ? std::max(run.network->mean_in_flight, 1.0)
                                               : static_cast<double>(run.read_concurrency);
      double ratio =
          now_in_flight / (now_in_flight + static_cast<double>(after - run.read_concurrency));
      // Bytes that arrived back to back cannot arrive faster: a response was arriving for this
      // share of the span, so the network part of the read shrinks at most to it. Behind a
      // bandwidth cap (10 MB/s, 2 in flight: a response arriving 95% of the time) the ratio
      // alone predicted 1.70x and 4 in flight measured 0.92x.
      if (run.network)
        ratio = std::max(ratio, std::clamp(run.network->receiving_fraction, 0.0, 1.0));
      alt.cost_scale[Stage::kRead] = (read->cpu_ns + read->blocked_ns * ratio) / total;
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
    const double here = PredictWithStepContention(model, model.Current(), *c);
    if (here > 0) return PredictWithStepContention(model, alt, *c) / here;
  }
  return model.Predict(alt).samples_per_s / now;
}

}  // namespace sluice
