#include "pipeline/batch.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice {

absl::string_view H2DFormatName(H2DFormat f) {
  switch (f) {
    case H2DFormat::kU8:
      return "u8";
    case H2DFormat::kF16:
      return "f16";
    case H2DFormat::kF32:
      return "f32";
  }
  return "?";
}

absl::StatusOr<H2DFormat> ParseH2DFormat(absl::string_view name) {
  if (name == "u8") return H2DFormat::kU8;
  if (name == "f16") return H2DFormat::kF16;
  if (name == "f32") return H2DFormat::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --h2d-format '", name, "' (expected u8, f16 or f32)"));
}

}  // namespace sluice
