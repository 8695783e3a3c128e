// Copying a window out of a padded image without building the padded image: the padding that
// torchvision's RandomCrop and CenterCrop apply (F.pad: constant, edge, reflect, symmetric),
// then the crop, as one pass over the output.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PADDED_WINDOW_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PADDED_WINDOW_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"

namespace sluice::transforms_internal {

// torchvision's padding modes; edge repeats the border value, reflect mirrors without repeating
// it (1 2 3 -> 3 2 | 1 2 3 | 2 1), symmetric mirrors repeating it (2 1 | 1 2 3 | 3 2).
enum class PaddingMode : uint8_t { kConstant, kEdge, kReflect, kSymmetric };
absl::string_view PaddingModeName(PaddingMode m);
absl::StatusOr<PaddingMode> ParsePaddingMode(absl::string_view name);

// One axis of the padded image: the source length and up to two rounds of padding applied one
// after the other, like two F.pad calls (RandomCrop pads by `padding`, then by pad_if_needed;
// with reflect or symmetric the second round mirrors the first one's output).
struct PaddedAxis {
  int64_t size = 0;
  int64_t before[2] = {0, 0};
  int64_t after[2] = {0, 0};

  int64_t padded_size() const { return size + before[0] + after[0] + before[1] + after[1]; }
  // The source coordinate that padded coordinate `c` shows, or -1 where the fill shows.
  int64_t Source(int64_t c, PaddingMode mode) const;
  // kInvalidArgument when a round pads more than `mode` can from the length it pads
  // (reflect: less than the length; symmetric: at most the length; edge: a non-empty axis).
  absl::Status Check(PaddingMode mode, absl::string_view axis_name) const;
};

// The window of out_h x out_w at (top, left) of the padded image, for each channel of `spec`
// (CHW): `fill` is one element of spec.dtype.
void CopyPaddedWindow(const SampleSpec& spec, const void* src, const PaddedAxis& rows,
                      const PaddedAxis& cols, PaddingMode mode, const void* fill, int64_t top,
                      int64_t left, uint32_t out_h, uint32_t out_w, void* dst);

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_PADDED_WINDOW_H_
