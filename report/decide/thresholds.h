// Every threshold the verdict uses, once (docs/bottleneck.md, "Verdict"). Decide
// (report/decide/decide.h) is their only reader, except kCommunicationBoundPct, which the
// data-parallel figures also print.
#ifndef SLUICE_REPORT_DECIDE_THRESHOLDS_H_
#define SLUICE_REPORT_DECIDE_THRESHOLDS_H_

namespace sluice::verdict_thresholds {

// Compute waited more than this share of training time: input-bound (tf.data's TF Profiler
// thresholds); between kPartlyInputPct and it: partly input-bound; below: compute-bound.
inline constexpr double kInputBoundPct = 20.0;
inline constexpr double kPartlyInputPct = 5.0;
// A device whose step spans lie mostly (this share of its busy time) inside the host's enqueue
// of the same step is waiting for launches, not computing.
inline constexpr double kLaunchGatedFraction = 0.5;
// CPU compute whose threads' CPU clocks advanced, while a step ran, by less than this share of
// the cores they could use was starved by something outside the run.
inline constexpr double kStarvedCoresFraction = 0.75;
// A stage whose threads spent at least this share of their wall busy time waiting for a core
// (the resource model's starvation) was kept from the CPU: CPU compute starved so did not
// wait for data, yet the data was the limit.
inline constexpr double kStarvedPct = 30.0;
// Compute and a pipeline stage whose capacities are this close are a close call: the machine's
// noise (+-25% on a VM) can swap them between identical runs. What-if speedups this close are
// within the noise too.
inline constexpr double kCloseCallFraction = 0.15;
// A stage limits and a part of it (StageInfo::part_of: decode inside preprocess) takes at least
// this share of its busy time: the part is named.
inline constexpr double kPartShareOfStage = 0.5;
// Data parallel: the share of training time the straggler (which waits for no one) spends in
// the exchange above which the run is communication-bound.
inline constexpr double kCommunicationBoundPct = 20.0;
// Data parallel: a straggler the others wait for less than this share of the step leaves rank
// 0's verdict as the job's.
inline constexpr double kStragglerWaitPct = 5.0;
// A probe's replay faster than the measured rate by less than this is within a machine's
// noise: free data would not speed the run up, whatever the wait.
inline constexpr double kNoGainSpeedup = 1.05;

}  // namespace sluice::verdict_thresholds

#endif  // SLUICE_REPORT_DECIDE_THRESHOLDS_H_
