// _sluice._transform_registry: the C++ registry's ops and their parameters, which
// sluice.transforms reads at import (its op classes and torchvision's objects follow it).
// _sluice._apply_transforms and _decode_transforms: one sample through a --transforms chain, for
// the oracle tests against torchvision (python/tests/test_transforms_oracle.py).
#ifndef SLUICE_PYTHON_SRC_TRANSFORMS_BINDING_H_
#define SLUICE_PYTHON_SRC_TRANSFORMS_BINDING_H_

#include "pybind11/pybind11.h"

namespace sluice::python {

void BindTransforms(pybind11::module_& m);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_TRANSFORMS_BINDING_H_
