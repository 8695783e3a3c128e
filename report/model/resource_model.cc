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

// A stage's own bound: `threads` threads, each needing cpu + blocked per sample, of which only
// the CPU part needs a core (so at most min(threads, cores) run it at once).
std::optional<double> OwnBound(const StageCost& c, int threads, double cores) {
  const double per_thread = c.cpu_ns + c.blocked_ns;
  if (per_thread <= 0) return std::nullopt;
  double bound = threads * 1e9 / per_thread;
  if (c.cpu_ns > 0) bound = std::min(bound, std::min<double>(threads, cores) * 1e9 / c.cpu_ns);
  return bound;
}

}  // namespace

Prediction ResourceModel::Predict(const Allocation& a) const {
  Prediction p;
  const double cores = std::max(kMinCores, a.cores);
  double cpu_sum = 0, largest_cpu = 0;
  Stage largest = Stage::kCompute;
  for (const StageCost& run_cost : stages_) {
    if (a.free_stage && *a.free_stage == run_cost.stage) continue;
    StageCost c = run_cost;
    if (const auto scale = a.cost_scale.find(c.stage); scale != a.cost_scale.end()) {
      const double f = std::max(0.0, scale->second);
      c.cpu_ns *= f;
      c.blocked_ns *= f;
      c.device_ns *= f;
    }
    if (const auto scale = a.host_scale.find(c.stage); scale != a.host_scale.end()) {
      c.cpu_ns *= std::max(0.0, scale->second);
    }
    const auto t = a.threads.find(c.stage);
    const int threads = std::max(1, t == a.threads.end() ? c.threads : t->second);
    if (c.alone_samples_per_s && *c.alone_samples_per_s > 0 && threads == c.threads) {
      p.bounds.push_back({Constraint::kStage, c.stage, *c.alone_samples_per_s});
    } else if (std::optional<double> own = OwnBound(c, threads, cores)) {
      p.bounds.push_back({Constraint::kStage, c.stage, *own});
    }
    if (c.device_ns > 0) {
      p.bounds.push_back({c.stage == Stage::kH2D ? Constraint::kLink : Constraint::kDevice, c.stage,
                          1e9 / c.device_ns});
    }
    cpu_sum += c.cpu_ns;
    if (c.cpu_ns > largest_cpu) {
      largest_cpu = c.cpu_ns;
      largest = c.stage;
    }
  }
  if (cpu_sum > 0) p.bounds.push_back({Constraint::kSharedCpu, largest, cores * 1e9 / cpu_sum});
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

ResourceModel BuildResourceModel(const std::vector<StageRow>& rows, const ComputeStats& cs,
                                 double cores, bool quiet_ceilings) {
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
    stages.push_back(c);
  }
  return ResourceModel(std::move(stages), cores);
}

}  // namespace sluice
