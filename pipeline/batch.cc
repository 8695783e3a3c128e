#include "pipeline/batch.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"

namespace sluice {

namespace {
constexpr auto kH2DFormatNames = MakeEnumNames<H2DFormat>(
    {{H2DFormat::kU8, "u8"}, {H2DFormat::kF16, "f16"}, {H2DFormat::kF32, "f32"}});
}  // namespace

absl::string_view H2DFormatName(H2DFormat f) { return kH2DFormatNames.Name(f); }

absl::StatusOr<H2DFormat> ParseH2DFormat(absl::string_view name) {
  if (std::optional<H2DFormat> f = kH2DFormatNames.Parse(name)) return *f;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --h2d-format '", name, "' (expected ", kH2DFormatNames.List(), ")"));
}

}  // namespace sluice
