// The order planner (pipeline/internal/order_planner.h) for benchmarks outside pipeline/: they
// plan an epoch as the pipeline does, to time one stage on the pipeline's own read and batch
// order. Target sluice::pipeline_testing, linked only by tests and benchmarks; production code
// reaches the planner through Pipeline.
#ifndef SLUICE_PIPELINE_TESTING_ORDER_PLANNER_H_
#define SLUICE_PIPELINE_TESTING_ORDER_PLANNER_H_

#include "pipeline/internal/order_planner.h"

namespace sluice::pipeline_testing {

using pipeline_internal::EpochPlan;
using pipeline_internal::FrameRef;
using pipeline_internal::OrderOptions;
using pipeline_internal::PlanEpoch;
using pipeline_internal::SplitLayout;

}  // namespace sluice::pipeline_testing

#endif  // SLUICE_PIPELINE_TESTING_ORDER_PLANNER_H_
