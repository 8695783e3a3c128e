// A probed loader's verdict (docs/bottleneck.md, "Any loader: sluice.probe"): the loader is the
// limit when the step waited for it, unless the replay, an experiment, shows free data is no
// faster.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/printable.h"
#include "report/decide/internal/verdicts.h"
#include "report/decide/thresholds.h"
#include "report/format.h"

namespace sluice::decide_internal {
namespace {

using namespace verdict_thresholds;  // NOLINT: the thresholds, by their names

// "replacing the loader could reach up to X (Y x)", with where X comes from.
std::string WhatIf(const ProbeFigures& f) {
  const std::string source =
      f.replay_steps ? absl::StrFormat(
                           "with free data (a replay of %d steps on the %s batch) the step "
                           "ran at %s",
                           *f.replay_steps, f.replay_batch, FormatRate(f.free_data_samples_per_s))
                     : absl::StrFormat(
                           "with free data the steps' own time allows %s (probe.replay() "
                           "measures it)",
                           FormatRate(f.free_data_samples_per_s));
  std::string s = absl::StrFormat(
      "%s: replacing the loader could reach up to %s (%.2fx, the "
      "free-data bound)",
      source, FormatRate(f.free_data_samples_per_s), f.speedup);
  if (f.switch_samples_per_s) {
    const char* why = f.switch_binding == "shared-cpu" ? "the two share the cores"
                      : f.switch_binding == "sluice"   ? "sluice's pipeline alone binds"
                                                       : "your step binds";
    absl::StrAppendFormat(&s,
                          "; switching to sluice.Loader is predicted at %s (%.2fx, the "
                          "prediction: %s; sluice alone ran at %s)",
                          FormatRate(*f.switch_samples_per_s), f.switch_speedup.value_or(0), why,
                          FormatRate(*f.switch_sluice_samples_per_s));
  } else if (f.replay_steps) {
    absl::StrAppend(&s,
                    "; probe.measure_switch(loader) with the sluice.Loader you would use "
                    "predicts the switch itself");
  } else {
    absl::StrAppend(&s,
                    "; probe.replay(steps=N) then probe.measure_switch(loader) predict the "
                    "switch itself");
  }
  if (f.speedup < kNoGainSpeedup) absl::StrAppend(&s, "; a faster loader would not speed it up");
  return s;
}

}  // namespace

Verdict ProbeVerdict(const BottleneckReport& a, const ProbeFigures& f) {
  Verdict v;
  if (a.steps == 0 || a.train_seconds <= 0) {
    v.sentence = "no data: the probe saw no finished step, so there is nothing to attribute";
    return v;
  }
  const double wait = a.input_bound_pct;
  const std::string waited =
      absl::StrFormat("compute waited %.0f%% of the time in next() of %s", wait,
                      Printable(f.loader, SIZE_MAX));  // bounded already (loader_probe.cc)
  // The replay is the experiment: when free data is not faster, the wait is not what limits
  // the run, however large it looks.
  const bool replay_shows_no_gain = f.replay_steps && f.speedup < kNoGainSpeedup;
  if (wait < kPartlyInputPct || replay_shows_no_gain) {
    v.verdict = VerdictClass::kComputeBound;
    v.limiting_stage = Stage::kCompute;
    v.sentence = absl::StrFormat("compute-bound: %s; compute is the limit at %s; %s", waited,
                                 FormatRate(a.measured_samples_per_s), WhatIf(f));
    return v;
  }
  v.verdict = wait > kInputBoundPct ? VerdictClass::kInputBound : VerdictClass::kPartlyInputBound;
  v.limiting_stage = Stage::kLoader;
  v.sentence = absl::StrFormat("%s: %s; the loader is the limit: it delivered %s; %s",
                               VerdictClassName(v.verdict), waited,
                               FormatRate(a.measured_samples_per_s), WhatIf(f));
  return v;
}

}  // namespace sluice::decide_internal
