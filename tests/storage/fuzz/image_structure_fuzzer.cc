// Fuzzes ingestion's structure check and header read (storage/image_structure.h) on arbitrary
// bytes: no input may crash, read out of bounds or trip a sanitizer. Invariants (a
// __builtin_trap() is a broken one): a file that passes the whole-file check has a readable
// header with the same encoding and size, at least 1x1; the check never passes a file that is
// cut short right after its signature.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "storage/image_structure.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<sluice::ImageStructure> whole = sluice::CheckImageStructure(bytes);
  const absl::StatusOr<sluice::ImageStructure> header = sluice::ReadImageHeader(bytes);
  if (whole.ok()) {
    if (!header.ok() || header->encoding != whole->encoding || header->width != whole->width ||
        header->height != whole->height || whole->width == 0 || whole->height == 0) {
      __builtin_trap();
    }
    if (sluice::CheckImageStructure(bytes.substr(0, 8)).ok()) __builtin_trap();
  }
  return 0;
}
