#include "python/src/advice_check.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/job/advice_rerun.h"
#include "python/src/errors.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

std::string Str(const py::handle& value) { return py::str(value).cast<std::string>(); }

// One entry of verdict.advice[] (or of advice_check[]): its setting and value.
Advice AdviceOf(const py::handle& entry) {
  const std::string flag = Str(entry["setting"]);
  const std::optional<AdviceSetting> setting = ParseAdviceFlag(flag);
  if (!setting.has_value()) {
    RaiseStatus(absl::InvalidArgumentError(
        absl::StrCat("check_advice: '", flag, "' is not a setting a report advises")));
  }
  Advice a;
  a.setting = *setting;
  a.value = Str(entry["value"]);
  const py::object predicted = entry.attr("get")("predicted_speedup", 0.0);
  if (!predicted.is_none()) a.predicted_speedup = predicted.cast<double>();
  return a;
}

double StepSeconds(const py::handle& report) {
  const int64_t steps = report.attr("get")("steps", 0).cast<int64_t>();
  for (const py::handle row : report["stages"]) {
    const py::object stage = row["stage"];
    if (stage.equal(py::str("compute")) && steps > 0) {
      return LoaderStepSeconds(row["busy_ns"].cast<int64_t>(), static_cast<uint64_t>(steps));
    }
  }
  return 0.0;
}

// A check as docs/report-schema.md's advice_check[] has it (AdviceCheckJson), with the step
// the Loader's reruns simulate.
py::dict CheckDict(const AdviceCheck& c, int64_t steps, double step_seconds) {
  py::dict d = py::module_::import("json").attr("loads")(
      AdviceCheckJson(c, Consumer::kPython, steps).dump());
  d["step_seconds"] = step_seconds;
  return d;
}

py::list CheckAdvice(const py::object& report, int64_t steps, int rounds,
                     const py::function& run_span) {
  const double step_seconds = StepSeconds(report);
  std::vector<Advice> advice;
  for (const py::handle entry : report["verdict"]["advice"]) advice.push_back(AdviceOf(entry));
  const AdviceNotRun not_run = [](const Advice& a) { return LoaderRerunNote(a.setting); };
  // The span runs Python (a new Loader iterated, the step as a sleep); its exceptions pass
  // through RerunAdvice unchanged.
  const AdviceSpan span = [&run_span](const Advice* change, int) -> absl::StatusOr<double> {
    if (change == nullptr) return run_span(py::none()).cast<double>();
    ASSIGN_OR_RETURN(const LoaderChange c, LoaderRerunChange(*change));
    return run_span(py::make_tuple(c.argument, c.value)).cast<double>();
  };
  py::list out;
  for (const AdviceCheck& c : Unwrap(RerunAdvice(advice, rounds, not_run, span))) {
    out.append(CheckDict(c, steps, step_seconds));
  }
  return out;
}

std::string CheckText(const py::iterable& checks, int64_t steps, int rounds) {
  std::vector<AdviceCheck> out;
  for (const py::handle entry : checks) {
    AdviceCheck c;
    c.advice = AdviceOf(entry);
    c.note = Str(entry["note"]);
    c.before_samples_per_s = entry["before_samples_per_s"].cast<double>();
    c.after_samples_per_s = entry["after_samples_per_s"].cast<double>();
    out.push_back(c);
  }
  return AdviceChecksText(out, Consumer::kPython, steps, rounds);
}

}  // namespace

void BindAdviceCheck(py::module_& m) {
  m.def("check_advice", &CheckAdvice, py::arg("report"), py::arg("steps"), py::arg("rounds"),
        py::arg("run_span"));
  m.def("advice_check_text", &CheckText, py::arg("checks"), py::arg("steps"), py::arg("rounds"));
  m.def(
      "step_seconds", [](const py::object& report) { return StepSeconds(report); },
      py::arg("report"));
}

}  // namespace sluice::python
