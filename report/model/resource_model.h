// The resource model under the verdict (docs/bottleneck.md, "The resource model"): what each
// stage of a run costs per sample, on which resource, and what rate any allocation of threads
// and cores would then reach. Plumber's idea (a stage's rate is its threads over its cost per
// item, and the stages share the cores), extended to the device half: the link (h2d copies)
// and the device's compute are resources of their own.
//
//   ResourceModel m = BuildResourceModel(report_rows, run.compute);
//   Prediction now = m.Predict(m.Current());         // the rate this run's allocation allows
//   Allocation more = m.Current(); more.threads[Stage::kDecompress] = 4;
//   double gain = m.Predict(more).samples_per_s / now.samples_per_s;
//
// A stage's cost is measured, not assumed: the thread CPU time of its items (sampled per frame
// or per batch, pipeline/stage_stats.h StageStats::cpu_ns), and for the read stage also the
// time its threads were off the CPU inside an item (I/O, an injected sleep), which another core
// would not shorten. Wall busy time beyond that is waiting for a core: starvation, which the
// model separates from work.
// Thread safety: plain values.
#ifndef SLUICE_REPORT_MODEL_RESOURCE_MODEL_H_
#define SLUICE_REPORT_MODEL_RESOURCE_MODEL_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/stage_stats.h"

namespace sluice {

struct StageRow;
struct BottleneckReport;
struct ComputeStats;

// What a bound holds a run to.
enum class Constraint {
  kStage,      // one stage's own threads: each busy on the stage's cost per sample
  kSharedCpu,  // the cores, shared by every stage that runs on a host core
  kLink,       // the host-to-device copies (one copy stream)
  kDevice,     // the device's compute stream
};
const char* ConstraintName(Constraint c);  // "stage", "shared-cpu", "link", "device"

// One stage's demand, per sample.
struct StageCost {
  Stage stage = Stage::kRead;
  int threads = 1;        // its concurrency in the run (compute on the CPU: the step's threads)
  double cpu_ns = 0;      // host CPU time per sample, summed over its threads
  double blocked_ns = 0;  // per sample, off the CPU inside an item for a reason a core does not
                          // cure (read: I/O, an injected sleep), summed over its threads
  double wall_ns = 0;     // measured busy wall time per sample, summed over its threads
  double device_ns = 0;   // link (h2d) or device (compute on a device) time per sample
  // The rate the stage reached alone on idle cores with the run's threads (its measured
  // ceiling, when there is one): its own bound instead of threads over CPU time. CPU compute's
  // threads spin less when they are starved, so CPU time under contention understates what a
  // step costs alone.
  std::optional<double> alone_samples_per_s;
  // Its threads work on each item together (CPU compute: a step split across its team), so
  // they want cores together; a pipeline stage's threads work on items of their own.
  bool gang = false;
};

// A bound on the run's rate and what sets it. For kSharedCpu, `stage` is the largest consumer
// of CPU time; for kLink, h2d; for kDevice, compute.
struct Bound {
  Constraint constraint = Constraint::kStage;
  Stage stage = Stage::kCompute;
  double samples_per_s = 0;
};

// Threads per stage and the cores they share; a stage absent from `threads` keeps the run's.
// `free_stage`: a stage whose cost is taken away (a what-if run). `cost_scale`: a stage's cost
// per sample times this factor (a part of it freed, as decode inside preprocess; cheaper data;
// fewer bytes over the link).
struct Allocation {
  std::map<Stage, int> threads;
  double cores = 1;  // the cores left to the run (other processes' use taken off)
  std::optional<Stage> free_stage;
  std::map<Stage, double> cost_scale;
  // A stage's host CPU time per sample only, times this factor (compute's enqueue under a CUDA
  // graph), after cost_scale.
  std::map<Stage, double> host_scale;
};

struct Prediction {
  double samples_per_s = 0;
  Bound binding;              // the lowest bound
  std::vector<Bound> bounds;  // every bound, lowest first
  // The bounds within kCloseCallFraction of the binding one (decide/thresholds.h), binding
  // first: identical runs could name any of them.
  std::vector<Bound> close;
};

class ResourceModel {
 public:
  // `cores`: the cores the run had, other processes' average use taken off (at least 0.1).
  ResourceModel(std::vector<StageCost> stages, double cores);

  const std::vector<StageCost>& stages() const { return stages_; }
  double cores() const { return cores_; }
  const StageCost* Find(Stage s) const;

  // The run's own allocation.
  Allocation Current() const;
  Prediction Predict(const Allocation& a) const;

  // The share of `s`'s wall busy time its threads waited for a core (wall - cpu - blocked over
  // wall), in [0, 100]; 0 for a stage the model does not hold.
  double StarvedPct(Stage s) const;
  // The share of the CPU time per sample that `s` takes, in [0, 100].
  double CpuSharePct(Stage s) const;

 private:
  std::vector<StageCost> stages_;
  double cores_ = 1;
};

// The model of a finished run, from the report's rows (AnalyzeRun) and the consumer's figures.
// Decode is inside preprocess (its cost is part of preprocess's) and pinned_wait is a wait, so
// neither is a stage of the model.
// `quiet_ceilings`: the rows' ceilings were measured on a quiet machine (Ceilings::
// other_cores_busy under kBusyMachineCores), so CPU compute's ceiling is its rate alone.
// `process_cpu_ns_per_sample`: the whole process's CPU time per sample (0: not measured). On a
// device, the part no stage accounts for is the device's own work on host threads (the
// simulated device runs its kernels on a CPU team) or the driver's: compute's host CPU time,
// its threads wanting cores together while the device runs a step.
ResourceModel BuildResourceModel(const std::vector<StageRow>& rows, const ComputeStats& compute,
                                 double cores, bool quiet_ceilings = true,
                                 double process_cpu_ns_per_sample = 0);

}  // namespace sluice

#endif  // SLUICE_REPORT_MODEL_RESOURCE_MODEL_H_
