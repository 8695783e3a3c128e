#include "pipeline/transforms/internal/padded_window.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/enum_names.h"

namespace sluice::transforms_internal {
namespace {
constexpr auto kPaddingModeNames =
    MakeEnumNames<PaddingMode>({{PaddingMode::kConstant, "constant"},
                                {PaddingMode::kEdge, "edge"},
                                {PaddingMode::kReflect, "reflect"},
                                {PaddingMode::kSymmetric, "symmetric"}});

// Where coordinate c of an axis of length n padded by `before` comes from: [0, n), or -1.
int64_t Unpad(int64_t c, int64_t n, int64_t before, PaddingMode mode) {
  const int64_t p = c - before;
  if (p >= 0 && p < n) return p;
  switch (mode) {
    case PaddingMode::kConstant:
      return -1;
    case PaddingMode::kEdge:
      return p < 0 ? 0 : n - 1;
    case PaddingMode::kReflect:
      return p < 0 ? -p : 2 * (n - 1) - p;
    case PaddingMode::kSymmetric:
      return p < 0 ? -p - 1 : 2 * n - 1 - p;
  }
  return -1;
}
}  // namespace

absl::string_view PaddingModeName(PaddingMode m) { return kPaddingModeNames.Name(m); }

absl::StatusOr<PaddingMode> ParsePaddingMode(absl::string_view name) {
  if (std::optional<PaddingMode> m = kPaddingModeNames.Parse(name)) return *m;
  return absl::InvalidArgumentError(absl::StrCat("expected ", kPaddingModeNames.List()));
}

int64_t PaddedAxis::Source(int64_t c, PaddingMode mode) const {
  const int64_t first = size + before[0] + after[0];  // the length after the first round
  const int64_t p = Unpad(c, first, before[1], mode);
  return p < 0 ? -1 : Unpad(p, size, before[0], mode);
}

absl::Status PaddedAxis::Check(PaddingMode mode, absl::string_view axis_name) const {
  int64_t n = size;
  for (int round = 0; round < 2; ++round) {
    const int64_t most = std::max(before[round], after[round]);
    if (most > 0) {
      const bool ok = mode == PaddingMode::kConstant || (mode == PaddingMode::kEdge && n > 0) ||
                      (mode == PaddingMode::kReflect && most < n) ||
                      (mode == PaddingMode::kSymmetric && most <= n);
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            PaddingModeName(mode), " padding of ", most, " on the ", axis_name, " needs a ",
            axis_name, " of ", mode == PaddingMode::kReflect ? "more than " : "at least ",
            mode == PaddingMode::kEdge ? 1 : most, ", got ", n));
      }
    }
    n += before[round] + after[round];
  }
  return absl::OkStatus();
}

void CopyPaddedWindow(const SampleSpec& spec, const void* src, const PaddedAxis& rows,
                      const PaddedAxis& cols, PaddingMode mode, const void* fill, int64_t top,
                      int64_t left, uint32_t out_h, uint32_t out_w, void* dst) {
  const size_t es = ElementSize(spec.dtype);
  const size_t row_bytes = size_t{spec.width} * es;
  const size_t plane_bytes = row_bytes * spec.height;
  // Output columns [x0, x1) show the source unmirrored: one memcpy per row.
  const int64_t shift = cols.before[0] + cols.before[1];
  const int64_t x0 = std::clamp<int64_t>(shift - left, 0, out_w);
  const int64_t x1 = std::clamp<int64_t>(shift + cols.size - left, x0, out_w);
  // The padded columns' sources, the same for every row and channel: looked up once (a crop's
  // padding is a few columns; wider padding falls back to the lookup per element).
  constexpr int64_t kMaxTableColumns = 256;
  int64_t source_of[kMaxTableColumns];
  const bool table = out_w - (x1 - x0) <= kMaxTableColumns;
  if (table) {
    int64_t k = 0;
    for (int64_t x = 0; x < out_w; ++x) {
      if (x < x0 || x >= x1) source_of[k++] = cols.Source(left + x, mode);
    }
  }
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  for (uint32_t c = 0; c < spec.channels; ++c) {
    const char* plane = in + c * plane_bytes;
    for (uint32_t y = 0; y < out_h; ++y, out += out_w * es) {
      const int64_t sy = rows.Source(top + y, mode);
      if (sy < 0) {
        for (uint32_t x = 0; x < out_w; ++x) std::memcpy(out + x * es, fill, es);
        continue;
      }
      const char* row = plane + sy * row_bytes;
      if (x1 > x0) std::memcpy(out + x0 * es, row + (x0 + left - shift) * es, (x1 - x0) * es);
      int64_t k = 0;
      for (int64_t x = 0; x < out_w; ++x) {
        if (x == x0 && x1 > x0) x = x1;
        if (x >= out_w) break;
        const int64_t sx = table ? source_of[k++] : cols.Source(left + x, mode);
        const char* from = sx < 0 ? static_cast<const char*>(fill) : row + sx * es;
        if (es == 1) {
          out[x] = *from;
        } else {
          std::memcpy(out + x * es, from, es);
        }
      }
    }
  }
}

}  // namespace sluice::transforms_internal
