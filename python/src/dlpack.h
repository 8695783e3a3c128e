// Batches as DLPack capsules (the "dltensor" protocol torch.from_dlpack reads), zero copy.
//
// Each tensor keeps `owner` alive until its consumer deletes it (or, if nobody consumed it,
// until its capsule dies): the owner is what keeps the batch's memory valid (a pipeline lease).
// The tensor's deleter may run on any thread, with or without the GIL: it touches no Python
// object, it only drops its reference to `owner`.
#ifndef SLUICE_PYTHON_SRC_DLPACK_H_
#define SLUICE_PYTHON_SRC_DLPACK_H_

#include <memory>

#include "dlpack/dlpack.h"
#include "pipeline/batch.h"
#include "pybind11/pybind11.h"
#include "storage/dataset.h"

namespace sluice::python {

struct BatchCapsules {
  pybind11::object images;  // [B, C, H, W] contiguous, as the batch's sample spec declares
  pybind11::object labels;  // [B]: int64 on the host (a copy of its own), int32 on a device
};

// The images and labels of `batch`, on `device`; the images' shape and dtype come from the
// batch's own sample spec. Needs the GIL.
BatchCapsules WrapBatch(std::shared_ptr<void> owner, const BatchView& batch, DLDevice device);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_DLPACK_H_
