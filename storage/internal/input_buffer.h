// Buffers sized from an input file (its size, or the shape its header declares): allocated
// without throwing. A std::bad_alloc there (a sparse 3 GB file, a header declaring 300000x
// 100x100) would otherwise reach main() as "unexpected exception"; it becomes a status naming
// the file and the bytes. Callers check the memory first (common/limits.h CheckMemory); this is
// the last guard.
//
// Errors: kResourceExhausted "<path>: cannot allocate N bytes (X GiB) for <what> (M available,
// <limited_by>)". Thread safety: stateless functions, thread safe.
#ifndef SLUICE_STORAGE_INTERNAL_INPUT_BUFFER_H_
#define SLUICE_STORAGE_INTERNAL_INPUT_BUFFER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"

namespace sluice::storage_internal {

// Resizes *s to n bytes (contents unspecified past its old size). A large buffer asks for
// transparent huge pages before it is first touched: on a VM a 4 KiB page fault is costly, and
// page faults were about a third of `sluice-shard create` on MNIST (measured with perf).
absl::Status ResizeForInput(std::string* s, uint64_t n, const std::string& path,
                            absl::string_view what);

// The whole of `file`, or of the file at `path`, in a buffer from ResizeForInput.
absl::StatusOr<std::string> ReadWholeInputFile(const RandomAccessFile& file);
absl::StatusOr<std::string> ReadWholeInputFile(Env* env, const std::string& path);

}  // namespace sluice::storage_internal

#endif  // SLUICE_STORAGE_INTERNAL_INPUT_BUFFER_H_
