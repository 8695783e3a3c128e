#include "python/src/dlpack.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace sluice::python {
namespace {

constexpr int kMaxDims = 4;

// Owns one tensor's shape, strides and DLManagedTensor, and a reference to the batch's owner.
struct TensorContext {
  std::shared_ptr<void> owner;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  DLManagedTensor managed{};
};

void DeleteTensor(DLManagedTensor* t) { delete static_cast<TensorContext*>(t->manager_ctx); }

// A capsule that nobody consumed still owns its tensor: free it when the capsule dies. This
// runs while an exception may be propagating (a KeyboardInterrupt unwinding the frame that
// held the capsule): it must neither clear nor set the error indicator.
void DeleteUnusedCapsule(PyObject* capsule) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, "dltensor")) {  // not renamed "used_dltensor" by a consumer
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  PyErr_Restore(type, value, traceback);
}

py::object MakeCapsule(std::shared_ptr<void> owner, void* data, DLDataType dtype, DLDevice dev,
                       std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> strides) {
  auto* ctx = new TensorContext;
  ctx->owner = std::move(owner);
  std::copy(shape.begin(), shape.end(), ctx->shape);
  std::copy(strides.begin(), strides.end(), ctx->strides);
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = data;
  t.device = dev;
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = ctx->shape;
  t.strides = ctx->strides;
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = DeleteTensor;
  PyObject* cap = PyCapsule_New(&ctx->managed, "dltensor", DeleteUnusedCapsule);
  if (cap == nullptr) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

DLDataType DLType(H2DFormat f) {
  switch (f) {
    case H2DFormat::kU8:
      return DLDataType{kDLUInt, 8, 1};
    case H2DFormat::kF16:
      return DLDataType{kDLFloat, 16, 1};
    case H2DFormat::kBF16:
      return DLDataType{kDLBfloat, 16, 1};
    case H2DFormat::kF32:
      break;
  }
  return DLDataType{kDLFloat, 32, 1};
}

}  // namespace

BatchCapsules WrapBatch(std::shared_ptr<void> owner, const BatchView& batch, DLDevice device) {
  // Batches are [B, C, H, W]: channels first and contiguous, or channels_last (HWC samples:
  // torch's strides for memory_format=torch.channels_last).
  const SampleSpec& s = batch.sample;
  const int64_t b = batch.size, c = s.channels, h = s.height, w = s.width;
  BatchCapsules out;
  if (s.layout == SampleLayout::kHWC) {
    out.images = MakeCapsule(owner, const_cast<void*>(batch.samples), DLType(s.dtype), device,
                             {b, c, h, w}, {c * h * w, 1, w * c, c});
  } else {
    out.images = MakeCapsule(owner, const_cast<void*>(batch.samples), DLType(s.dtype), device,
                             {b, c, h, w}, {c * h * w, h * w, w, 1});
  }
  if (device.device_type == kDLCPU) {
    // Host labels leave as int64, torch's class-index type, converted here (B values, no GIL
    // needed): torch's .to(int64) on the int32 view cost more than the conversion. The copy
    // is the capsule's own, so labels kept alone hold no pipeline buffer.
    auto labels = std::make_shared<std::vector<int64_t>>(batch.labels, batch.labels + b);
    void* data = labels->data();
    out.labels = MakeCapsule(std::move(labels), data, DLDataType{kDLInt, 64, 1}, device, {b}, {1});
    return out;
  }
  out.labels = MakeCapsule(std::move(owner), const_cast<int32_t*>(batch.labels),
                           DLDataType{kDLInt, 32, 1}, device, {b}, {1});
  return out;
}

}  // namespace sluice::python
