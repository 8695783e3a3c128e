#include "report/analysis/loader_probe.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_fields.h"
#include "common/printable.h"
#include "report/decide/decide.h"
#include "report/format.h"
#include "report/model/resource_model.h"
#include "report/stages.h"

namespace sluice {
SLUICE_DEFINE_JSON_FIELDS(ProbeFigures, loader, passes, wait_ns, step_ns, span_ns, mean_wait_us,
                          mean_step_us, max_wait_us, replay_steps, replay_seconds,
                          replay_samples_per_s, replay_batch, free_data_samples_per_s,
                          free_data_source, replay_cores_busy, replay_kernel_pct,
                          replay_page_faults_per_step, speedup, switch_sluice_samples_per_s,
                          switch_sluice_cpu_us_per_sample, switch_step_cpu_us_per_sample,
                          switch_samples_per_s, switch_speedup, switch_binding)

namespace {

double Pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// The loader's name is the caller's text (a name= argument, a class's __qualname__): at most
// kMaxEchoChars bytes of it, cut at a character boundary, then "... (N bytes)". The JSON keeps
// it so (its writer escapes it); the text and the verdict print it through Printable.
std::string BoundedName(const std::string& name) {
  if (name.size() <= kMaxEchoChars) return name;
  size_t cut = kMaxEchoChars;
  while (cut > 0 && (static_cast<uint8_t>(name[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(name.substr(0, cut), "... (", name.size(), " bytes)");
}

// A replay keeping this many cores busy is a team of threads (one thread's replay measures
// 0.97-1.00 here, a two-thread OpenBLAS step 1.98).
constexpr double kProbeTeamCores = 1.3;
// A replay with this share of its CPU time in the kernel swings with the allocator's state
// (an MLP step: 20-35% when it swung 2x between runs, under 5% with the memory kept).
constexpr double kProbeKernelPct = 15;
// ... and only when the step faults memory in on every step: kernel time without faults is
// something else (a loaded machine's scheduling, threads yielding), which the allocator's
// settings do not change (a compute-only step: 0-0.24 faults per step, 0-16% in the kernel).
constexpr double kProbeFaultsPerStep = 1;

absl::Status Validate(const LoaderProbeRecord& r) {
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("loader probe: ", field, " ", why));
  };
  if (r.wait_ns < 0) return bad("wait_ns", absl::StrCat("is negative (", r.wait_ns, ")"));
  if (r.step_ns < 0) return bad("step_ns", absl::StrCat("is negative (", r.step_ns, ")"));
  if (r.max_wait_ns < 0 || r.max_wait_ns > r.wait_ns) {
    return bad("max_wait_ns",
               absl::StrCat("must lie in [0, wait_ns = ", r.wait_ns, "], got ", r.max_wait_ns));
  }
  if (r.steps == 0 && r.samples > 0) {
    return bad("samples", absl::StrCat("is ", r.samples, " but no step was counted"));
  }
  if (r.replay_steps > 0 && (r.replay_span_ns <= 0 || r.replay_samples == 0)) {
    return bad("replay_span_ns", absl::StrCat("and replay_samples must be positive after ",
                                              r.replay_steps, " replayed steps, got ",
                                              r.replay_span_ns, " ns and ", r.replay_samples));
  }
  if (r.sluice_samples > 0 && (r.sluice_span_ns <= 0 || r.sluice_cpu_ns < 0)) {
    return bad("sluice_span_ns",
               absl::StrCat("must be positive and sluice_cpu_ns >= 0 after ", r.sluice_samples,
                            " samples, got ", r.sluice_span_ns, " ns and ", r.sluice_cpu_ns));
  }
  if (r.replay_cpu_ns < 0) {
    return bad("replay_cpu_ns", absl::StrCat("is negative (", r.replay_cpu_ns, ")"));
  }
  if (r.replay_sys_ns < 0 || r.replay_sys_ns > r.replay_cpu_ns) {
    return bad("replay_sys_ns", absl::StrCat("must lie in [0, replay_cpu_ns = ", r.replay_cpu_ns,
                                             "], got ", r.replay_sys_ns));
  }
  return absl::OkStatus();
}

// The rate after switching to sluice.Loader, from the resource model of two stages sharing
// the cores: sluice's pipeline (its rate alone, its CPU per sample) and the user's step (its
// rate with free data, the replay, and its CPU per sample). The lowest of the two rates, each
// slowed by the other's threads on its cores, and the cores over their summed CPU time binds. Needs
// the replay and the switch measured.
void PredictSwitch(const LoaderProbeRecord& r, int cores, ProbeFigures* f) {
  if (r.sluice_samples == 0 || r.replay_steps == 0 || r.replay_cpu_ns <= 0) return;
  StageCost sluice;
  sluice.stage = Stage::kLoader;
  sluice.cpu_ns = static_cast<double>(r.sluice_cpu_ns) / r.sluice_samples;
  sluice.wall_ns = static_cast<double>(r.sluice_span_ns) / r.sluice_samples;
  sluice.alone_samples_per_s = r.sluice_samples * 1e9 / r.sluice_span_ns;
  StageCost step;
  step.stage = Stage::kCompute;
  step.cpu_ns = static_cast<double>(r.replay_cpu_ns) / r.replay_samples;
  step.wall_ns = static_cast<double>(r.replay_span_ns) / r.replay_samples;
  step.alone_samples_per_s = f->free_data_samples_per_s;
  const ResourceModel model({sluice, step}, cores);
  const Prediction p = model.Predict(model.Current());
  f->switch_sluice_samples_per_s = sluice.alone_samples_per_s;
  f->switch_sluice_cpu_us_per_sample = sluice.cpu_ns / 1e3;
  f->switch_step_cpu_us_per_sample = step.cpu_ns / 1e3;
  f->switch_samples_per_s = p.samples_per_s;
  // A stage held below its rate alone is held there by the other's threads on its cores.
  const StageCost& bound_cost = p.binding.stage == Stage::kLoader ? sluice : step;
  const bool shared = p.binding.constraint == Constraint::kSharedCpu ||
                      p.binding.samples_per_s < 0.99 * bound_cost.alone_samples_per_s.value_or(0);
  f->switch_binding = shared ? "shared-cpu" : p.binding.stage == Stage::kLoader ? "sluice" : "step";
}

// The loader as one stage: its busy time is the exposed wait, the time it kept the step
// blocked in next(). Its capacity is not measured: a loader that works ahead (worker
// processes) is busy while the step runs, which the probe cannot see.
// A row of the probe's report: its items are the steps, busy `busy_ns` of the span.
StageRow ProbeRow(Stage stage, const LoaderProbeRecord& r, int64_t busy_ns, double span_ns) {
  StageRow row;
  row.stage = stage;
  row.present = r.steps > 0;
  row.items = r.steps;
  row.samples = r.samples;
  row.items_per_s = span_ns > 0 ? r.steps * 1e9 / span_ns : 0;
  row.samples_per_s = span_ns > 0 ? r.samples * 1e9 / span_ns : 0;
  row.busy_ns = busy_ns;
  row.busy_pct = Pct(busy_ns, span_ns);
  return row;
}

StageRow LoaderRow(const LoaderProbeRecord& r, double span_ns) {
  return ProbeRow(Stage::kLoader, r, r.wait_ns, span_ns);
}

// The user's step as compute: busy is the step time, its wait the exposed wait.
StageRow ComputeRow(const LoaderProbeRecord& r, double span_ns) {
  StageRow row = ProbeRow(Stage::kCompute, r, r.step_ns, span_ns);
  row.wait_input_pct = Pct(r.wait_ns, span_ns);
  if (r.step_ns > 0 && r.samples > 0) {
    row.capacity_samples_per_s = r.samples * 1e9 / r.step_ns;
    row.cpu_ns_per_sample = static_cast<double>(r.step_ns) / r.samples;
  }
  return row;
}

ProbeFigures Figures(const LoaderProbeRecord& r, const BottleneckReport& rep) {
  ProbeFigures f;
  f.loader = BoundedName(r.loader);
  f.passes = r.passes;
  f.wait_ns = r.wait_ns;
  f.step_ns = r.step_ns;
  f.span_ns = r.wait_ns + r.step_ns;
  if (r.steps > 0) {
    f.mean_wait_us = r.wait_ns / 1e3 / r.steps;
    f.mean_step_us = r.step_ns / 1e3 / r.steps;
  }
  f.max_wait_us = r.max_wait_ns / 1e3;
  if (r.replay_steps > 0) {
    f.replay_steps = r.replay_steps;
    f.replay_seconds = r.replay_span_ns / 1e9;
    f.replay_samples_per_s = r.replay_samples * 1e9 / r.replay_span_ns;
    f.replay_batch = r.replay_batch;
    f.free_data_samples_per_s = *f.replay_samples_per_s;
    f.free_data_source = "replay";
    if (r.replay_cpu_ns > 0) {
      f.replay_cores_busy = static_cast<double>(r.replay_cpu_ns) / r.replay_span_ns;
      f.replay_kernel_pct = Pct(r.replay_sys_ns, r.replay_cpu_ns);
      f.replay_page_faults_per_step = static_cast<double>(r.replay_page_faults) / r.replay_steps;
    }
  } else {
    f.free_data_samples_per_s = rep.stages[1].capacity_samples_per_s.value_or(0);
    f.free_data_source = "step_time";
  }
  if (rep.measured_samples_per_s > 0) {
    f.speedup = f.free_data_samples_per_s / rep.measured_samples_per_s;
  }
  PredictSwitch(r, rep.cores, &f);
  if (f.switch_samples_per_s && rep.measured_samples_per_s > 0) {
    f.switch_speedup = *f.switch_samples_per_s / rep.measured_samples_per_s;
  }
  return f;
}

// What makes the step's own rate, and so any prediction built on it, unsteady: a step that
// keeps more than one core busy (a BLAS or OpenMP team: a loader's threads on its cores can
// slow such a team by far more than their CPU time, as its threads wait at each barrier for
// the one descheduled), and a step that spends much of its time in the kernel faulting in
// memory (docs/bottleneck.md, "Any loader: sluice.probe").
void AddReplayNotes(const ProbeFigures& f, int cores, std::vector<std::string>* notes) {
  if (f.replay_cores_busy && *f.replay_cores_busy >= kProbeTeamCores) {
    notes->push_back(absl::StrFormat(
        "your step kept %.1f of the %d cores busy with free data: it runs a team of threads "
        "(BLAS, OpenMP). A loader's threads on the same cores can slow such a team by more "
        "than their CPU time, so the prediction%s may be high; one thread per step "
        "(torch.set_num_threads(1), and OPENBLAS_NUM_THREADS=1 where torch uses OpenBLAS, "
        "which torch.set_num_threads does not bind) leaves the loader its own core",
        *f.replay_cores_busy, cores, f.switch_samples_per_s ? " after switching" : ""));
  }
  if (f.replay_kernel_pct && *f.replay_kernel_pct >= kProbeKernelPct &&
      f.replay_page_faults_per_step.value_or(0) >= kProbeFaultsPerStep) {
    notes->push_back(absl::StrFormat(
        "your step spent %.0f%% of its CPU time in the kernel (%.0f page faults per step): the "
        "allocator hands large freed tensors back to the system and faults them in again on "
        "the next step, so the step's speed swings with the allocator's state (2x between runs "
        "of one MLP step, docs/bottleneck.md) and so may the rates predicted from it. "
        "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold="
        "1073741824, or a caching allocator (LD_PRELOAD of jemalloc or tcmalloc), keeps the "
        "memory",
        *f.replay_kernel_pct, f.replay_page_faults_per_step.value_or(0)));
  }
}

}  // namespace

absl::StatusOr<ProbeReport> AnalyzeLoaderProbe(const LoaderProbeRecord& record, int cores) {
  if (absl::Status s = Validate(record); !s.ok()) return s;
  ProbeReport out;
  BottleneckReport& rep = out.report;
  rep.cores = std::max(1, cores);
  rep.device = absl::StrCat("python step (probe of ", Printable(record.loader), ")");
  const double span_ns = static_cast<double>(record.wait_ns) + record.step_ns;
  rep.train_seconds = span_ns / 1e9;
  rep.samples = record.samples;
  rep.steps = record.steps;
  rep.measured_samples_per_s = span_ns > 0 ? record.samples * 1e9 / span_ns : 0;
  rep.stages = {LoaderRow(record, span_ns), ComputeRow(record, span_ns)};
  rep.stages[0].attributed_wait_pct = rep.stages[0].busy_pct;  // every wait is the loader's
  rep.capacity_limit_samples_per_s = rep.stages[1].capacity_samples_per_s.value_or(0);
  rep.input_bound_pct = rep.stages[1].wait_input_pct;
  rep.host_wait_pct = rep.input_bound_pct;
  rep.compute_host_pct = rep.stages[1].busy_pct;
  out.probe = Figures(record, rep);
  // Predicted: the rate after switching when it was measured, else what the run does when the
  // loader costs nothing (the free-data bound; the loader has no capacity).
  rep.predicted_samples_per_s =
      out.probe.switch_samples_per_s.value_or(out.probe.free_data_samples_per_s);
  rep.notes.push_back(absl::StrCat(
      "measured from outside the loader: its row is the exposed wait (the step blocked in "
      "next()), not its work, which may overlap the step (worker processes); the rows' CPU "
      "figures are not measured",
      out.probe.switch_samples_per_s
          ? " (the switch's CPU times per sample, in the probe object, are the process's)"
          : ""));
  AddReplayNotes(out.probe, rep.cores, &rep.notes);
  if (!out.probe.replay_steps && record.steps > 0) {
    rep.notes.push_back(
        "free-data rate from the steps' own time; probe.replay(steps=N) measures it on a cached "
        "batch");
  }
  ApplyVerdict(Decide({.analysis = &rep, .probe = &out.probe}), &rep);
  return out;
}

std::string ProbeReport::ToText() const {
  const BottleneckReport& r = report;
  std::string out = absl::StrFormat(
      "probe report: %s, %d cores, %.3f s covered (first next() to the last step's end, %d "
      "%s), %d samples in %d steps\n",
      Printable(probe.loader, SIZE_MAX), r.cores, r.train_seconds, probe.passes,
      probe.passes == 1 ? "pass" : "passes", r.samples, r.steps);
  absl::StrAppendFormat(&out, "%-8s %9s %18s %7s %18s\n", "stage", "items", "rate", "share%",
                        "capacity");
  for (const StageRow& row : r.stages) {
    absl::StrAppendFormat(
        &out, "%-8s %9d %18s %7.1f %18s\n", StageName(row.stage), row.items,
        FormatRate(row.samples_per_s), row.busy_pct,
        row.capacity_samples_per_s ? FormatRate(*row.capacity_samples_per_s) : "-");
  }
  absl::StrAppendFormat(&out,
                        "per step: waited %.1f us in next() (longest %.1f us), stepped %.1f us; "
                        "the shares are of the span and add up to 100%%\n",
                        probe.mean_wait_us, probe.max_wait_us, probe.mean_step_us);
  absl::StrAppendFormat(&out, "measured %s (samples / the span); free data %s",
                        FormatRate(r.measured_samples_per_s),
                        FormatRate(probe.free_data_samples_per_s));
  if (probe.replay_steps) {
    absl::StrAppendFormat(&out, " (replay of %d steps on the %s batch, %.3f s)",
                          *probe.replay_steps, probe.replay_batch, *probe.replay_seconds);
  } else {
    absl::StrAppend(&out, " (from the steps' time; no replay)");
  }
  absl::StrAppendFormat(&out, "; speedup %.2fx\n", probe.speedup);
  if (probe.switch_samples_per_s) {
    absl::StrAppendFormat(
        &out,
        "switch to sluice.Loader: predicted %s (%.2fx; binds: %s): sluice alone %s at %.1f us "
        "of CPU per sample, the step %.1f us of CPU per sample, on %d cores\n",
        FormatRate(*probe.switch_samples_per_s), probe.switch_speedup.value_or(0),
        probe.switch_binding, FormatRate(*probe.switch_sluice_samples_per_s),
        *probe.switch_sluice_cpu_us_per_sample, *probe.switch_step_cpu_us_per_sample, r.cores);
  }
  absl::StrAppend(&out, "verdict: ", r.sentence, "\n");
  for (const std::string& n : r.notes) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

nlohmann::ordered_json ProbeReport::ToJson() const {
  nlohmann::ordered_json j = report.ToJson();
  nlohmann::ordered_json notes = j["notes"];
  j.erase("notes");
  j["probe"] = probe;
  j["notes"] = notes;
  return j;
}

}  // namespace sluice
