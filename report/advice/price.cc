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
  return model.Predict(alt).samples_per_s / now;
}

}  // namespace sluice
