#include "python/src/errors.h"

#include <string>

namespace py = pybind11;

namespace sluice::python {
namespace {

PyObject* g_data_loss_error = nullptr;  // sluice.DataLossError, set by RegisterExceptions

PyObject* ExceptionType(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return PyExc_ValueError;
    case absl::StatusCode::kNotFound:
      return PyExc_FileNotFoundError;
    case absl::StatusCode::kPermissionDenied:
      return PyExc_PermissionError;
    case absl::StatusCode::kAlreadyExists:
      return PyExc_FileExistsError;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return PyExc_OSError;
    case absl::StatusCode::kDataLoss:
      return g_data_loss_error;
    case absl::StatusCode::kDeadlineExceeded:
      return PyExc_TimeoutError;
    default:  // kInternal (a failed device call), kUnknown, kCancelled, ...
      return PyExc_RuntimeError;
  }
}

}  // namespace

void RegisterExceptions(py::module_& m) {
  static py::exception<void> data_loss(m, "DataLossError", PyExc_OSError);
  g_data_loss_error = data_loss.ptr();
}

[[noreturn]] void RaiseStatus(const absl::Status& s) {
  const std::string msg(s.message());
  PyErr_SetString(ExceptionType(s.code()), msg.c_str());
  throw py::error_already_set();
}

}  // namespace sluice::python
