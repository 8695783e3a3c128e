// Fuzzes the IDX reader (gzip detection and inflate, magic, dimensions, counts).
// Input layout: u16 little-endian length L, then L bytes of the images file, then the labels
// file. A successful parse must re-encode to IDX that parses to the same records.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/coding.h"
#include "storage/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string in(reinterpret_cast<const char*>(data), size);
  const size_t split = std::min<size_t>(sluice::DecodeFixed16(in.data()), size - 2);
  const std::string images = in.substr(2, split);
  const std::string labels = in.substr(2 + split);
  auto r = sluice::ParseIdxPair(images, "images", labels, "labels");
  if (!r.ok()) {
    const auto code = r.status().code();
    if (code != absl::StatusCode::kDataLoss && code != absl::StatusCode::kInvalidArgument) {
      __builtin_trap();
    }
    return 0;
  }
  if (r->count == 0 || r->samples.size() != r->count * r->spec.sample_bytes() ||
      r->labels.size() != r->count * r->spec.label_bytes()) {
    __builtin_trap();
  }
  auto again =
      sluice::ParseIdxPair(sluice::EncodeIdxImages(*r), "i", sluice::EncodeIdxLabels(*r), "l");
  if (!again.ok() || again->samples != r->samples || again->labels != r->labels ||
      !(again->spec == r->spec)) {
    __builtin_trap();
  }
  return 0;
}
