// sluice.probe's report (python/sluice/probe.py): the probe times the wrapped loader in Python
// and hands its figures to the C++ report (report/analysis/loader_probe.h), so a probe's
// verdict and JSON are the C++ report's, not a second one written in Python.
#ifndef SLUICE_PYTHON_SRC_PROBE_H_
#define SLUICE_PYTHON_SRC_PROBE_H_

#include "pybind11/pybind11.h"

namespace sluice::python {

// Adds _sluice.analyze_probe(loader, passes, steps, samples, wait_ns, step_ns, max_wait_ns,
// replay_steps, replay_samples, replay_span_ns, replay_batch, cores=0) -> (report JSON text,
// report text); cores 0: the usable cores. ValueError naming the field on bad figures.
void BindProbe(pybind11::module_& m);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_PROBE_H_
