#include "report/model/resource_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "report/analysis/bottleneck_report.h"
#include "report/decide/thresholds.h"
#include "report/record/run_record.h"

namespace sluice {
namespace {
// A machine whose other processes took every core still ran the run: never model below this.
constexpr double kMinCores = 0.1;
// A stage's bound among the others counts only this far below the shared bound: at the
// shared bound every stage is slowed alike, and its search stops within 1e-4 of a limit.
constexpr double kBelowShared = 0.99;
}  // namespace

const char* ConstraintName(Constraint c) {
  switch (c) {
    case Constraint::kStage:
      return "stage";
    case Constraint::kSharedCpu:
      return "shared-cpu";
    case Constraint::kLink:
      return "link";
    case Constraint::kDevice:
      return "device";
  }
  return "unknown";
}

ResourceModel::ResourceModel(std::vector<StageCost> stages, double cores)
    : stages_(std::move(stages)), cores_(std::max(kMinCores, cores)) {}

const StageCost* ResourceModel::Find(Stage s) const {
  for (const StageCost& c : stages_) {
    if (c.stage == s) return &c;
  }
  return nullptr;
}

Allocation ResourceModel::Current() const {
  Allocation a;
  a.cores = cores_;
  for (const StageCost& c : stages_) a.threads[c.stage] = c.threads;
  return a;
}

namespace {

// The stages of one prediction: the run's costs with the allocation applied.
struct Load {
  StageCost cost;
  int threads = 1;
  // The part of a thread's time it needs a core for, at the candidate rate (updated).
  double runnable = 0;
  // The share of a core a runnable thread of it gets, on average (updated).
  double speed = 1;
};

// The distribution of how many threads want a core at once, other than `self`'s own (and, for
// a stage whose threads work alone, its other threads): each stage's threads want one for
// their runnable share of the time, independently of one another, or all together for a gang.
std::vector<double> OthersRunnable(const std::vector<Load>& loads, size_t self) {
  std::vector<double> dist = {1.0};
  const auto add = [&dist](int n, double q, bool gang) {
    std::vector<double> next(dist.size() + static_cast<size_t>(n), 0.0);
    for (size_t m = 0; m < dist.size(); ++m) {
      if (gang) {
        next[m] += dist[m] * (1 - q);
        next[m + static_cast<size_t>(n)] += dist[m] * q;
        continue;
      }
      double p = std::pow(1 - q, n);  // binomial(n, q), term by term
      for (int k = 0; k <= n; ++k) {
        next[m + static_cast<size_t>(k)] += dist[m] * p;
        if (k < n) p = q >= 1 ? (k + 1 == n ? 1.0 : 0.0) : p * (n - k) / (k + 1) * q / (1 - q);
      }
    }
    dist = std::move(next);
  };
  for (size_t j = 0; j < loads.size(); ++j) {
    const Load& l = loads[j];
    if (j == self) {
      if (!l.cost.gang && l.threads > 1) add(l.threads - 1, l.runnable, false);
    } else if (l.runnable > 0) {
      add(l.threads, l.runnable, l.cost.gang);
    }
  }
  return dist;
}

// The share of a core each runnable thread of stage `i` gets on average: the cores split
// evenly among the threads that want one at that moment. A gang's step runs at its share of
// the cores over what it had alone (its alone rate already ran its threads on min(threads,
// cores)).
double Speed(const std::vector<Load>& loads, size_t i, double cores) {
  const std::vector<double> dist = OthersRunnable(loads, i);
  const Load& l = loads[i];
  const int own = l.cost.gang ? l.threads : 1;
  double s = 0;
  for (size_t m = 0; m < dist.size(); ++m) {
    s += dist[m] * std::min(1.0, cores / (own + static_cast<double>(m)));
  }
  return l.cost.gang ? s / std::min(1.0, cores / own) : s;
}

// Each stage's runnable share and speed at `rate`, to a fixed point: a stage slowed by the
// others is runnable longer per item, which slows the others in turn.
void Settle(std::vector<Load>* loads, double rate, double cores) {
  for (Load& l : *loads) l.speed = 1;
  for (int iter = 0; iter < 20; ++iter) {
    for (Load& l : *loads) {
      l.runnable = std::min(1.0, rate * l.cost.cpu_ns * 1e-9 / (l.threads * l.speed));
    }
    double moved = 0;
    for (size_t i = 0; i < loads->size(); ++i) {
      const double s = Speed(*loads, i, cores);
      moved = std::max(moved, std::abs(s - (*loads)[i].speed));
      (*loads)[i].speed = s;
    }
    if (moved < 1e-5) break;
  }
}

// Whether stage `i`'s threads keep up with `rate`: each needs, per item, its CPU time at its
// speed plus the time it is blocked (read's I/O).
bool KeepsUp(std::vector<Load>* loads, size_t i, double rate, double cores) {
  Settle(loads, rate, cores);
  const Load& l = (*loads)[i];
  return rate * (l.cost.cpu_ns / l.speed + l.cost.blocked_ns) * 1e-9 <= l.threads;
}

// A stage's bound alone (nothing else wanting a core): threads / (cpu + blocked) per sample,
// at most min(threads, cores) / cpu; a measured alone rate (a ceiling) stands for it.
std::optional<double> AloneBound(const Load& l, double cores) {
  if (l.cost.alone_samples_per_s) return *l.cost.alone_samples_per_s;
  const double per_thread = l.cost.cpu_ns + l.cost.blocked_ns;
  if (per_thread <= 0) return std::nullopt;
  double bound = l.threads * 1e9 / per_thread;
  if (l.cost.cpu_ns > 0) {
    bound = std::min(bound, std::min<double>(l.threads, cores) * 1e9 / l.cost.cpu_ns);
  }
  return bound;
}

// A stage's own bound among the others: the highest rate, at most `alone`, its threads keep
// up with while the other stages run at that rate too and take their share of the cores.
// Only a bound under `below` is searched for (above it another binds): `alone` when the
// threads keep up there.
double OwnBound(std::vector<Load>* loads, size_t i, double alone, double below, double cores) {
  double hi = std::min(alone, below);
  if ((*loads)[i].cost.cpu_ns <= 0 || KeepsUp(loads, i, hi, cores)) return alone;
  // Each wanting thread gets at least cores / all the threads of a core: the stage keeps up
  // at its alone bound times that.
  int all = 0;
  for (const Load& l : *loads) all += l.cost.cpu_ns > 0 ? l.threads : 0;
  double lo = alone * std::min(1.0, cores / std::max(1, all));
  for (int iter = 0; iter < 30 && hi - lo > hi * 1e-4; ++iter) {
    const double mid = (lo + hi) / 2;
    (KeepsUp(loads, i, mid, cores) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

Prediction ResourceModel::Predict(const Allocation& a) const {
  Prediction p;
  const double cores = std::max(kMinCores, a.cores);
  double cpu_sum = 0, largest_cpu = 0, second_cpu = 0;
  Stage largest = Stage::kCompute, second = Stage::kCompute;
  std::vector<Load> loads;
  for (const StageCost& run_cost : stages_) {
    if (a.free_stage && *a.free_stage == run_cost.stage) continue;
    StageCost c = run_cost;
    if (const auto scale = a.cost_scale.find(c.stage); scale != a.cost_scale.end()) {
      const double f = std::max(0.0, scale->second);
      c.cpu_ns *= f;
      c.blocked_ns *= f;
      c.device_ns *= f;
      if (c.alone_samples_per_s && f > 0) *c.alone_samples_per_s /= f;
    }
    if (const auto scale = a.host_scale.find(c.stage); scale != a.host_scale.end()) {
      c.cpu_ns *= std::max(0.0, scale->second);
    }
    const auto t = a.threads.find(c.stage);
    const int threads = std::max(1, t == a.threads.end() ? c.threads : t->second);
    // A measured alone rate holds for the run's threads only. It is also the step's CPU time
    // alone: its threads busy throughout (they spin less when starved, so the run's own CPU
    // time understates it).
    if (threads != c.threads || (c.alone_samples_per_s && *c.alone_samples_per_s <= 0)) {
      c.alone_samples_per_s.reset();
    }
    if (c.alone_samples_per_s) {
      c.cpu_ns =
          std::max(c.cpu_ns, std::min<double>(threads, cores) * 1e9 / *c.alone_samples_per_s);
    }
    if (c.device_ns > 0) {
      p.bounds.push_back({c.stage == Stage::kH2D ? Constraint::kLink : Constraint::kDevice, c.stage,
                          1e9 / c.device_ns});
    }
    cpu_sum += c.cpu_ns;
    if (c.cpu_ns > largest_cpu) {
      second_cpu = largest_cpu;
      second = largest;
      largest_cpu = c.cpu_ns;
      largest = c.stage;
    } else if (c.cpu_ns > second_cpu) {
      second_cpu = c.cpu_ns;
      second = c.stage;
    }
    // A stage whose CPU time alone fills more cores than its threads (a loader measured whole,
    // with threads of its own) wants that many cores while it works.
    const int wanting =
        c.alone_samples_per_s
            ? std::max(threads,
                       static_cast<int>(std::ceil(c.cpu_ns * *c.alone_samples_per_s * 1e-9 - 1e-9)))
            : threads;
    loads.push_back({c, wanting});
  }
  const double shared = cpu_sum > 0 ? cores * 1e9 / cpu_sum : 0;
  if (cpu_sum > 0) p.bounds.push_back({Constraint::kSharedCpu, largest, shared});
  for (size_t i = 0; i < loads.size(); ++i) {
    const std::optional<double> alone = AloneBound(loads[i], cores);
    if (!alone) continue;
    // Contention moves a stage's own bound only where it binds before the cores do: above the
    // shared bound every stage is slowed alike, and the cores are the limit, not its threads.
    const double own = OwnBound(&loads, i, *alone, shared * kBelowShared, cores);
    p.bounds.push_back(
        {Constraint::kStage, loads[i].cost.stage, own < shared * kBelowShared ? own : *alone});
  }
  std::stable_sort(p.bounds.begin(), p.bounds.end(), [](const Bound& x, const Bound& y) {
    return x.samples_per_s < y.samples_per_s;
  });
  if (p.bounds.empty()) return p;
  p.binding = p.bounds.front();
  p.samples_per_s = p.binding.samples_per_s;
  for (const Bound& b : p.bounds) {
    if (b.samples_per_s <= p.samples_per_s * (1 + verdict_thresholds::kCloseCallFraction)) {
      p.close.push_back(b);
    }
  }
  // The cores bind, and the stage named for them (the largest user) is so by a hair: identical
  // runs name either (a quarter-side photo folder named decode or compute in turn).
  if (p.binding.constraint == Constraint::kSharedCpu && second_cpu > 0 &&
      second_cpu >= largest_cpu * (1 - verdict_thresholds::kCloseCallFraction)) {
    p.close.push_back({Constraint::kSharedCpu, second, p.binding.samples_per_s});
  }
  return p;
}

double ResourceModel::StarvedPct(Stage s) const {
  const StageCost* c = Find(s);
  if (c == nullptr || c->wall_ns <= 0) return 0;
  return std::clamp(100.0 * (c->wall_ns - c->cpu_ns - c->blocked_ns) / c->wall_ns, 0.0, 100.0);
}

double ResourceModel::CpuSharePct(Stage s) const {
  double sum = 0;
  for (const StageCost& c : stages_) sum += c.cpu_ns;
  const StageCost* c = Find(s);
  return c == nullptr || sum <= 0 ? 0 : std::clamp(100.0 * c->cpu_ns / sum, 0.0, 100.0);
}

namespace {

// Compute's cost, and the process's CPU time per sample that no other stage accounts for;
// compute null when the model holds none.
struct Unaccounted {
  StageCost* compute = nullptr;
  double cpu_ns = 0;
};
Unaccounted FindUnaccounted(double process_cpu_ns_per_sample, std::vector<StageCost>* stages) {
  Unaccounted u;
  u.cpu_ns = process_cpu_ns_per_sample;
  for (StageCost& c : *stages) {
    if (c.stage == Stage::kCompute) {
      u.compute = &c;
    } else {
      u.cpu_ns -= c.cpu_ns;
    }
  }
  return u;
}

// The process's CPU time that no stage accounts for, given to compute on a device (see
// BuildResourceModel): its host CPU time per sample at least the enqueue's, and its threads
// the cores that CPU time keeps busy while the device computes, rounded up (the simulated
// device's team: 2; a CUDA driver's: 1).
void AddDeviceHostCpu(double process_cpu_ns_per_sample, double cores,
                      std::vector<StageCost>* stages) {
  if (process_cpu_ns_per_sample <= 0) return;
  const Unaccounted u = FindUnaccounted(process_cpu_ns_per_sample, stages);
  StageCost* compute = u.compute;
  if (compute == nullptr || compute->device_ns <= 0) return;
  // At most the cores for the device's time: beyond that, the rest is time per second, not per
  // sample (a CPU team spinning while it waits for the next step).
  const double host = std::min(u.cpu_ns, cores * compute->device_ns);
  if (host <= compute->cpu_ns) return;
  compute->cpu_ns = host;
  compute->wall_ns = host;
  compute->gang = true;
  // Rounded up: the host work runs within the device's time, so its threads never bound the
  // step below the device (1.4 cores' worth on one thread would).
  compute->threads = std::max(1, static_cast<int>(std::ceil(host / compute->device_ns - 1e-9)));
}

// The process's CPU time that no stage accounts for, given to a foreign step (the Python
// consumer) when it is more than its thread's CPU time: the step's own threads (torch's
// intra-op team, OpenBLAS's) work on other cores than the thread that called it. At most the
// cores for the step's wall time; a step using more than one core runs as a team.
void AddForeignStepCpu(double process_cpu_ns_per_sample, double cores,
                       std::vector<StageCost>* stages) {
  if (process_cpu_ns_per_sample <= 0) return;
  const Unaccounted u = FindUnaccounted(process_cpu_ns_per_sample, stages);
  StageCost* compute = u.compute;
  if (compute == nullptr || compute->wall_ns <= 0) return;
  const double step = std::min(u.cpu_ns, cores * compute->wall_ns);
  if (step <= compute->cpu_ns) return;
  compute->cpu_ns = step;
  compute->gang = true;
  compute->threads = std::max(1, static_cast<int>(std::ceil(step / compute->wall_ns - 1e-9)));
  compute->wall_ns = compute->threads * compute->wall_ns;
}

}  // namespace

ResourceModel BuildResourceModel(const std::vector<StageRow>& rows, const ComputeStats& cs,
                                 double cores, bool quiet_ceilings,
                                 double process_cpu_ns_per_sample) {
  std::vector<StageCost> stages;
  for (const StageRow& r : rows) {
    if (!r.present || r.samples == 0) continue;
    StageCost c;
    c.stage = r.stage;
    c.threads = std::max(1, r.concurrency);
    const double samples = static_cast<double>(r.samples);
    switch (r.stage) {
      case Stage::kRead:
      case Stage::kDecompress:
      case Stage::kPreprocess:
        c.wall_ns = r.busy_ns / samples;
        c.cpu_ns = std::min(r.cpu_ns_per_sample, c.wall_ns);
        // Only the reader blocks inside an item (its pread, an injected sleep); the others'
        // wall time beyond their CPU time is waiting for a core.
        if (r.stage == Stage::kRead) c.blocked_ns = c.wall_ns - c.cpu_ns;
        break;
      case Stage::kH2D:
        c.device_ns = r.busy_ns / samples;
        break;
      case Stage::kCompute:
        if (cs.on_device) {
          c.threads = 1;
          c.device_ns = r.busy_ns / samples;
          c.cpu_ns = static_cast<double>(cs.enqueue_ns) / samples;
          c.wall_ns = c.cpu_ns;
        } else {
          c.wall_ns = static_cast<double>(r.busy_ns) * c.threads / samples;
          c.cpu_ns = std::min(r.cpu_ns_per_sample, c.wall_ns);
          c.gang = true;
          // A ceiling this run beat is stale (cached on a busier machine): not the step's rate
          // alone.
          if (quiet_ceilings && r.ceiling_samples_per_s && r.capacity_samples_per_s &&
              *r.ceiling_samples_per_s >= *r.capacity_samples_per_s) {
            c.alone_samples_per_s = r.ceiling_samples_per_s;
          }
        }
        break;
      default:
        continue;  // decode (inside preprocess), pinned_wait (a wait)
    }
    // Work done outside the span (between epochs, during evaluation) was not waited for in
    // it: the span holds the rest of the stage's cost per sample.
    const double in_span = 1.0 - std::clamp(r.outside_span_pct, 0.0, 100.0) / 100.0;
    if (r.stage != Stage::kCompute && in_span < 1.0) {
      c.cpu_ns *= in_span;
      c.blocked_ns *= in_span;
      c.wall_ns *= in_span;
      c.device_ns *= in_span;
    }
    stages.push_back(c);
  }
  AddDeviceHostCpu(process_cpu_ns_per_sample, cores, &stages);
  if (cs.foreign_step && !cs.on_device)
    AddForeignStepCpu(process_cpu_ns_per_sample, cores, &stages);
  return ResourceModel(std::move(stages), cores);
}

}  // namespace sluice
