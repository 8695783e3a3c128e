// Sample arrays from outside (NumPy, .npy files, CIFAR-10 batches) to the stored layout.
//
// Shards store each sample channels-last, (H, W, C) (docs/formats/shard.md, "Records"). Arrays
// arrive as [N, D] feature vectors (stored as H = 1, W = D, C = 1), [N, H, W] (C = 1), or 4-D
// in a declared layout: NHWC (stored as is) or NCHW (transposed to HWC while copying).
// A 4-D array without a declared layout is read as NHWC only when that reading is the only
// plausible one: its last dimension is at most 4 (a channel count) and its second is more than 4
// (not one). Anything else ([N, 3, 32, 32], [N, 4, 4, 3], [N, 32, 32, 16]) is refused, and the
// message shows the shape and both readings (docs/python.md, "write_dataset").
// Errors: kInvalidArgument naming the array (`what`), its shape and what was expected.
// Thread safety: stateless functions, thread safe.
#ifndef SLUICE_STORAGE_ARRAY_LAYOUT_H_
#define SLUICE_STORAGE_ARRAY_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

enum class ArrayLayout { kNHWC, kNCHW };

// "NHWC" or "NCHW"; kInvalidArgument naming `argument` (e.g. "layout", "--layout") otherwise.
absl::StatusOr<ArrayLayout> ParseArrayLayout(absl::string_view text, absl::string_view argument);

// The samples of an array of shape `dims`, in the stored (H, W, C) terms.
struct ArraySamples {
  uint64_t count = 0;
  uint32_t height = 0, width = 0, channels = 0;
  bool transpose_chw = false;  // the array holds each sample as (C, H, W)
};

// Reads `dims` (2-D, 3-D or 4-D) under `layout` (may be absent; see the file comment). `what`
// names the array in errors (a file name, "images"); `argument` is how the caller's user
// declares a layout (`layout="NCHW"`, `--layout NCHW`), quoted in the ambiguity message.
absl::StatusOr<ArraySamples> SamplesOfArray(const std::vector<uint64_t>& dims,
                                            std::optional<ArrayLayout> layout,
                                            absl::string_view what, absl::string_view argument);

// "[5000, 3, 32, 32]".
std::string ShapeString(const std::vector<uint64_t>& dims);

// Copies `count` samples of (channels, height, width) elements of `element_bytes` each from
// `src` to `dst` as (height, width, channels). `src` and `dst` must not overlap.
void TransposeChwToHwc(const char* src, char* dst, uint64_t count, uint32_t channels,
                       uint32_t height, uint32_t width, size_t element_bytes);

}  // namespace sluice

#endif  // SLUICE_STORAGE_ARRAY_LAYOUT_H_
