// Checks and argument forms several ops share.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_OP_CHECKS_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_OP_CHECKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/internal/padded_window.h"
#include "pipeline/transforms/internal/pil_resample.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice::transforms_internal {

// Every op works on channels-first pixels; only DecodeImage reads encoded images.
inline absl::Status CheckChannelsFirst(absl::string_view op, const SampleSpec& in) {
  if (in.extent == SampleExtent::kEncoded) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expected pixels, got ", SampleSpecString(in),
                     "; put DecodeImage(mode=RGB) or DecodeImage(mode=L) first"));
  }
  if (in.layout == SampleLayout::kCHW) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": expected a channels-first (CHW) sample, got ", SampleSpecString(in)));
}

struct CropSize {
  uint32_t height = 0;
  uint32_t width = 0;
};

// torchvision's `size`: an int (a square) or (h, w); both positive.
inline absl::StatusOr<CropSize> SizeArg(const TransformArgs& args) {
  absl::StatusOr<std::vector<int64_t>> size = args.Ints("size", {1, 2}, std::nullopt);
  if (!size.ok()) return size.status();
  const int64_t h = (*size)[0], w = size->back();
  if (h < 1 || w < 1 || h > UINT32_MAX || w > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.Where("size"), ": expected a positive size, got ", h, "x", w));
  }
  return CropSize{static_cast<uint32_t>(h), static_cast<uint32_t>(w)};
}

struct PaddingSides {
  uint32_t left = 0, top = 0, right = 0, bottom = 0;
};

// torchvision's `padding`: one int pads every side, two are (left/right, top/bottom), four
// (left, top, right, bottom); each at most 2^30. `fallback` when absent (nullopt: required).
inline absl::StatusOr<PaddingSides> PaddingArg(const TransformArgs& args,
                                               std::optional<std::vector<int64_t>> fallback) {
  absl::StatusOr<std::vector<int64_t>> p = args.Ints("padding", {1, 2, 4}, std::move(fallback));
  if (!p.ok()) return p.status();
  for (int64_t v : *p) {
    if (v > UINT32_MAX / 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(args.Where("padding"), ": expected at most ", UINT32_MAX / 4));
    }
  }
  const std::vector<int64_t>& v = *p;
  PaddingSides s;
  s.left = static_cast<uint32_t>(v[0]);
  s.top = static_cast<uint32_t>(v.size() == 1 ? v[0] : v[1]);
  s.right = static_cast<uint32_t>(v.size() == 4 ? v[2] : v[0]);
  s.bottom = static_cast<uint32_t>(v.size() == 4 ? v[3] : s.top);
  return s;
}

// torchvision's `padding_mode` (default constant).
inline absl::StatusOr<PaddingMode> PaddingModeArg(const TransformArgs& args) {
  absl::StatusOr<std::string> mode = args.Name("padding_mode", "constant");
  if (!mode.ok()) return mode.status();
  absl::StatusOr<PaddingMode> parsed = ParsePaddingMode(*mode);
  if (!parsed.ok()) {
    return args.Wrong("padding_mode", absl::StripPrefix(parsed.status().message(), "expected "));
  }
  return *parsed;
}

// torchvision's `interpolation` of Resize and RandomResizedCrop: only bilinear (the default) is
// implemented; written bilinear, BILINEAR or InterpolationMode.BILINEAR.
inline absl::Status BilinearArg(const TransformArgs& args) {
  absl::StatusOr<std::string> mode = args.Name("interpolation", "bilinear");
  if (!mode.ok()) return mode.status();
  std::string lower = *mode;
  for (char& ch : lower)
    ch = static_cast<char>(absl::ascii_tolower(static_cast<unsigned char>(ch)));
  if (lower == "bilinear" || lower == "interpolationmode.bilinear") return absl::OkStatus();
  return args.Wrong("interpolation", "bilinear (the only mode sluice implements)");
}

// torchvision's `antialias`: None or False (0.14's default on tensors: F.interpolate without
// antialiasing, internal/bilinear.h) give false; True gives true, PIL's resampling
// (internal/pil_resample.h), what torchvision applies to PIL images whatever the flag says.
inline absl::StatusOr<bool> AntialiasArg(const TransformArgs& args) {
  if (!args.Has("antialias")) return false;
  absl::StatusOr<std::string> name = args.Name("antialias", std::nullopt);
  if (name.ok() && (*name == "None" || *name == "False")) return false;
  if (name.ok() && *name == "True") return true;
  return absl::InvalidArgumentError(absl::StrCat(
      args.Where("antialias"),
      ": expected True (PIL's resampling, as torchvision resizes a PIL image), False or None "
      "(the tensor path's bilinear resize without antialiasing)"));
}

// Resize's and RandomResizedCrop's resampling: antialias (PIL's, AntialiasArg) and its filter.
// interpolation bilinear (torchvision's default) either way; bicubic only with antialias=True
// (PIL's bicubic; the tensor path is bilinear only).
struct ResizeMode {
  bool antialias = false;
  PilFilter filter = PilFilter::kBilinear;
};
inline absl::StatusOr<ResizeMode> ResizeModeArg(const TransformArgs& args) {
  absl::StatusOr<bool> antialias = AntialiasArg(args);
  if (!antialias.ok()) return antialias.status();
  absl::StatusOr<std::string> mode = args.Name("interpolation", "bilinear");
  if (!mode.ok()) return mode.status();
  const std::string lower = absl::AsciiStrToLower(*mode);
  if (lower == "bilinear" || lower == "interpolationmode.bilinear") {
    return ResizeMode{*antialias, PilFilter::kBilinear};
  }
  if ((lower == "bicubic" || lower == "interpolationmode.bicubic") && *antialias) {
    return ResizeMode{true, PilFilter::kBicubic};
  }
  return args.Wrong("interpolation",
                    "bilinear, or bicubic with antialias=True (PIL's bicubic resampling; the "
                    "tensor path is bilinear only)");
}

inline const char* InterpolationName(PilFilter f) {
  return f == PilFilter::kBicubic ? "bicubic" : "bilinear";
}

// The PIL path takes 8-bit images only (PIL's resampling is fixed-point on 8 bits).
inline absl::Status CheckU8ForAntialias(absl::string_view op, const SampleSpec& in) {
  if (in.dtype == ElementType::kU8) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, "(antialias=True) resamples as PIL does, on 8-bit images: expected uint8 input, got ",
      SampleSpecString(in),
      " (put it before ToDtype and Normalize, as a PIL pipeline resizes "
      "before ToTensor)"));
}

// "(32, 32)": a size as the identities write it.
inline std::string SizeText(uint32_t h, uint32_t w) { return absl::StrCat("(", h, ", ", w, ")"); }

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_OP_CHECKS_H_
