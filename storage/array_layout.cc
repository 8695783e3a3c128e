#include "storage/array_layout.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

std::string Reading(const std::vector<uint64_t>& d, bool chw) {
  const uint64_t c = chw ? d[1] : d[3], h = chw ? d[2] : d[1], w = chw ? d[3] : d[2];
  return absl::StrCat("as ", chw ? "NCHW" : "NHWC", " ", d[0], " samples of ", h, "x", w, " with ",
                      c, c == 1 ? " channel" : " channels");
}

}  // namespace

absl::StatusOr<ArrayLayout> ParseArrayLayout(absl::string_view text, absl::string_view argument) {
  if (text == "NHWC") return ArrayLayout::kNHWC;
  if (text == "NCHW") return ArrayLayout::kNCHW;
  return absl::InvalidArgumentError(absl::StrCat(argument, " \"", text,
                                                 "\": expected NHWC (channels last) or NCHW "
                                                 "(channels first)"));
}

std::string ShapeString(const std::vector<uint64_t>& dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::StatusOr<ArraySamples> SamplesOfArray(const std::vector<uint64_t>& dims,
                                            std::optional<ArrayLayout> layout,
                                            absl::string_view what, absl::string_view argument) {
  if (dims.size() < 2 || dims.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape ", ShapeString(dims), " has ", dims.size(),
                     " dimensions; expected 2 ([N, D] feature vectors), 3 ([N, H, W]) or 4 "
                     "([N, H, W, C] or [N, C, H, W])"));
  }
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] == 0 || dims[i] > UINT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": shape ", ShapeString(dims),
                                                     ": dimension ", i,
                                                     " is out of range, expected in [1, 2^32)"));
    }
  }
  ArraySamples s;
  s.count = dims[0];
  if (dims.size() == 2) {
    s.height = 1;
    s.width = static_cast<uint32_t>(dims[1]);
    s.channels = 1;
    return s;
  }
  if (dims.size() == 3) {
    s.height = static_cast<uint32_t>(dims[1]);
    s.width = static_cast<uint32_t>(dims[2]);
    s.channels = 1;
    return s;
  }
  if (!layout) {
    if (dims[3] <= 4 && dims[1] > 4) {
      layout = ArrayLayout::kNHWC;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": shape ", ShapeString(dims), " is ambiguous: ", Reading(dims, false), ", ",
          Reading(dims, true), "; declare which with ", argument,
          " (without it a 4-D array is read as NHWC only when its last dimension is at most 4 "
          "and its second more than 4)"));
    }
  }
  s.transpose_chw = *layout == ArrayLayout::kNCHW;
  s.channels = static_cast<uint32_t>(s.transpose_chw ? dims[1] : dims[3]);
  s.height = static_cast<uint32_t>(s.transpose_chw ? dims[2] : dims[1]);
  s.width = static_cast<uint32_t>(s.transpose_chw ? dims[3] : dims[2]);
  return s;
}

void TransposeChwToHwc(const char* src, char* dst, uint64_t count, uint32_t channels,
                       uint32_t height, uint32_t width, size_t element_bytes) {
  const size_t plane = size_t{height} * width;
  const size_t sample = plane * channels * element_bytes;
  for (uint64_t n = 0; n < count; ++n) {
    const char* in = src + n * sample;
    char* out = dst + n * sample;
    for (size_t p = 0; p < plane; ++p) {
      for (uint32_t c = 0; c < channels; ++c) {
        std::memcpy(out + (p * channels + c) * element_bytes,
                    in + (size_t{c} * plane + p) * element_bytes, element_bytes);
      }
    }
  }
}

}  // namespace sluice
