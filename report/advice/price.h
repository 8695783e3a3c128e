// The price of a piece of advice: the resource model's rate for the run with the change made,
// over its rate for the run as it was (docs/bottleneck.md, "Advice"). A setting the model holds
// changes the model's allocation (a stage's threads, the link's bytes per sample, compute's
// launches); a change to the data scales the cost it shrinks (half the image side: a quarter
// of decode's pixels); a setting that relieves a wait (read-ahead, ring slots) lets the run
// reach the model's rate, which its wait kept it from.
//
//   std::optional<double> gain = PredictedSpeedup(advice, model, report, run);
//   if (gain && *gain >= kMinAdvisedSpeedup) ... advise it
//
// Thread safety: pure functions.
#ifndef SLUICE_REPORT_ADVICE_PRICE_H_
#define SLUICE_REPORT_ADVICE_PRICE_H_

#include <optional>

#include "report/advice/advice.h"
#include "report/model/resource_model.h"
#include "report/record/run_record.h"

namespace sluice {

struct BottleneckReport;

// Nothing predicted under this is advised: a prediction off by 15% still gains.
inline constexpr double kMinAdvisedSpeedup = 1.2;

// The model's predicted speedup of the run with `advice` applied; nullopt where the model
// cannot price it (the pool size, a zstd level) or predicts no rate.
std::optional<double> PredictedSpeedup(const Advice& advice, const ResourceModel& model,
                                       const BottleneckReport& report, const RunRecord& run);

}  // namespace sluice

#endif  // SLUICE_REPORT_ADVICE_PRICE_H_
