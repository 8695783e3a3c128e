#include "storage/internal/input_buffer.h"

#include <sys/mman.h>

#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "common/printable.h"
#include "common/status_macros.h"

namespace sluice::storage_internal {

absl::Status ResizeForInput(std::string* s, uint64_t n, const std::string& path,
                            absl::string_view what) {
  try {
    s->reserve(n);
#ifdef MADV_HUGEPAGE
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    if (n >= 2 * kHuge) {
      const uintptr_t begin = reinterpret_cast<uintptr_t>(s->data());
      const uintptr_t lo = (begin + kHuge - 1) & ~(kHuge - 1);
      const uintptr_t hi = (begin + n) & ~(kHuge - 1);
      if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // a hint
    }
#endif
    s->resize(n);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  if (s->size() == n) return absl::OkStatus();
  const AvailableMemory m = GetAvailableMemory();
  return absl::ResourceExhaustedError(absl::StrCat(
      Printable(path), ": cannot allocate ", n, " bytes (", FormatBytes(n), ") for ", what,
      " (out of memory: ", FormatBytes(m.bytes), " available, ", m.limited_by, ")"));
}

absl::StatusOr<std::string> ReadWholeInputFile(const RandomAccessFile& file) {
  std::string out;
  RETURN_IF_ERROR(ResizeForInput(&out, file.Size(), file.path(), "its bytes, read whole"));
  ASSIGN_OR_RETURN(size_t n, file.Read(0, out.size(), out.data()));
  if (n != out.size()) {
    return absl::DataLossError(
        absl::StrCat(file.path(), ": short read: expected ", out.size(), " bytes, got ", n));
  }
  return out;
}

absl::StatusOr<std::string> ReadWholeInputFile(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  return ReadWholeInputFile(*file);
}

}  // namespace sluice::storage_internal
