#include "python/src/probe.h"

#include <cstdint>
#include <string>

#include "common/limits.h"
#include "python/src/errors.h"
#include "report/analysis/loader_probe.h"

namespace py = pybind11;

namespace sluice::python {

void BindProbe(py::module_& m) {
  m.def(
      "analyze_probe",
      [](const std::string& loader, uint64_t passes, uint64_t steps, uint64_t samples,
         int64_t wait_ns, int64_t step_ns, int64_t max_wait_ns, uint64_t replay_steps,
         uint64_t replay_samples, int64_t replay_span_ns, const std::string& replay_batch,
         int cores, int64_t replay_cpu_ns, uint64_t sluice_samples, int64_t sluice_span_ns,
         int64_t sluice_cpu_ns, int64_t replay_sys_ns, uint64_t replay_page_faults) {
        LoaderProbeRecord r;
        r.loader = loader;
        r.passes = passes;
        r.steps = steps;
        r.samples = samples;
        r.wait_ns = wait_ns;
        r.step_ns = step_ns;
        r.max_wait_ns = max_wait_ns;
        r.replay_steps = replay_steps;
        r.replay_samples = replay_samples;
        r.replay_span_ns = replay_span_ns;
        r.replay_batch = replay_batch;
        r.replay_cpu_ns = replay_cpu_ns;
        r.replay_sys_ns = replay_sys_ns;
        r.replay_page_faults = replay_page_faults;
        r.sluice_samples = sluice_samples;
        r.sluice_span_ns = sluice_span_ns;
        r.sluice_cpu_ns = sluice_cpu_ns;
        const ProbeReport rep = Unwrap(AnalyzeLoaderProbe(r, cores > 0 ? cores : UsableCores()));
        return py::make_tuple(rep.ToJson().dump(), rep.ToText());
      },
      py::arg("loader"), py::arg("passes"), py::arg("steps"), py::arg("samples"),
      py::arg("wait_ns"), py::arg("step_ns"), py::arg("max_wait_ns"), py::arg("replay_steps"),
      py::arg("replay_samples"), py::arg("replay_span_ns"), py::arg("replay_batch"),
      py::arg("cores") = 0, py::arg("replay_cpu_ns") = 0, py::arg("sluice_samples") = 0,
      py::arg("sluice_span_ns") = 0, py::arg("sluice_cpu_ns") = 0, py::arg("replay_sys_ns") = 0,
      py::arg("replay_page_faults") = 0);
}

}  // namespace sluice::python
