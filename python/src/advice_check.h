// Loader.report(check_advice=True) (python/sluice/advice_check.py): the decisions are C++'s,
// engine/job/advice_rerun.h, shared with sluice-train's --check-advice; Python supplies only
// the span, a function that iterates a new Loader (it runs Python, so it stays there).
#ifndef SLUICE_PYTHON_SRC_ADVICE_CHECK_H_
#define SLUICE_PYTHON_SRC_ADVICE_CHECK_H_

#include "pybind11/pybind11.h"

namespace sluice::python {

// Adds to `m`:
//   check_advice(report, steps, rounds, run_span) -> [check dict]: each piece of the report's
//     verdict.advice rerun (RerunAdvice) with run_span(None) as the loader was and
//     run_span((argument, value)) with the change, each returning samples/s; the dicts of
//     docs/report-schema.md's advice_check[]. run_span's exceptions propagate unchanged.
//   advice_check_text(checks, steps, rounds) -> str: those dicts as AdviceChecksText.
//   step_seconds(report) -> float: the step a rerun simulates (LoaderStepSeconds).
// `report`: the dict of Loader.report(). ValueError for an advice setting no report gives.
void BindAdviceCheck(pybind11::module_& m);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_ADVICE_CHECK_H_
