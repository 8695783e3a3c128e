// Fuzzes the .npy header parser (magic, version, header length, the dict literal, dtype and
// shape checks, the data size). A successful parse must describe exactly the bytes after the
// header, and a failure must be kDataLoss or kInvalidArgument.
#include <cstddef>
#include <cstdint>
#include <string>

#include "storage/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  auto a = sluice::ParseNpy(in, "x.npy");
  if (!a.ok()) {
    const auto code = a.status().code();
    if (code != absl::StatusCode::kDataLoss && code != absl::StatusCode::kInvalidArgument) {
      __builtin_trap();
    }
    return 0;
  }
  uint64_t bytes = a->item_bytes;
  for (uint64_t d : a->shape) bytes *= d;
  if (a->item_bytes == 0 || bytes != a->data.size() ||
      a->data.data() + a->data.size() != in.data() + in.size()) {
    __builtin_trap();
  }
  return 0;
}
