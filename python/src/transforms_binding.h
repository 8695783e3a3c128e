// _sluice._apply_transforms: one sample through a --transforms chain, for the oracle tests
// against torchvision (python/tests/test_transforms_oracle.py). Private to the tests.
#ifndef SLUICE_PYTHON_SRC_TRANSFORMS_BINDING_H_
#define SLUICE_PYTHON_SRC_TRANSFORMS_BINDING_H_

#include "pybind11/pybind11.h"

namespace sluice::python {

void BindTransforms(pybind11::module_& m);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_TRANSFORMS_BINDING_H_
