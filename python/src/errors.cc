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

py::str FsPathToPython(const std::string& path) {
  PyObject* text =
      PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
  if (text == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(text);
}

void RegisterExceptions(py::module_& m) {
  static py::exception<void> data_loss(m, "DataLossError", PyExc_OSError);
  g_data_loss_error = data_loss.ptr();
}

[[noreturn]] void RaiseStatus(const absl::Status& s) {
  // Decoded with backslash escapes: a message naming a file whose name is not UTF-8 (a Latin-1
  // "caf\xe9") must reach Python whole; PyErr_SetString would lose it to a UnicodeDecodeError.
  const absl::string_view msg = s.message();
  PyObject* text =
      PyUnicode_DecodeUTF8(msg.data(), static_cast<Py_ssize_t>(msg.size()), "backslashreplace");
  if (text == nullptr) throw py::error_already_set();
  PyErr_SetObject(ExceptionType(s.code()), text);
  Py_DECREF(text);
  throw py::error_already_set();
}

}  // namespace sluice::python
