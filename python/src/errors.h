// absl::Status -> Python exception, the message unchanged (docs/python.md, "Errors"). The only
// place in the module that turns a Status into an exception; every other file calls these.
//
// Call with the GIL held: they set the Python error indicator and throw
// py::error_already_set, which pybind11 hands back to the interpreter.
#ifndef SLUICE_PYTHON_SRC_ERRORS_H_
#define SLUICE_PYTHON_SRC_ERRORS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pybind11/pybind11.h"

namespace sluice::python {

// Adds sluice.DataLossError (a subclass of OSError) to `m`: kDataLoss raises it.
void RegisterExceptions(pybind11::module_& m);

// kInvalidArgument, kOutOfRange, kFailedPrecondition: ValueError; kNotFound:
// FileNotFoundError; kPermissionDenied: PermissionError; kAlreadyExists: FileExistsError;
// kUnavailable, kResourceExhausted, kAborted: OSError; kDataLoss: DataLossError;
// kDeadlineExceeded: TimeoutError; anything else: RuntimeError.
// The message is decoded as UTF-8, a byte that is not UTF-8 as a backslash escape.
[[noreturn]] void RaiseStatus(const absl::Status& s);

// A path C++ found or built, as Python spells a file name (os.fsdecode: a byte that is not
// UTF-8 as a surrogate escape, PEP 383), so that Python can pass it back and open that file.
// Python hands such a path to C++ as the bytes os.fsencode gives (sluice/_args.py,
// _native_path): pybind11 takes bytes for a std::string.
pybind11::str FsPathToPython(const std::string& path);

inline void Check(const absl::Status& s) {
  if (!s.ok()) RaiseStatus(s);
}

template <typename T>
T Unwrap(absl::StatusOr<T> s) {
  if (!s.ok()) RaiseStatus(s.status());
  return std::move(*s);
}

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_SRC_ERRORS_H_
