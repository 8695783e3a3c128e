#include "pipeline/batch.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/printable.h"

namespace sluice {

namespace {
constexpr auto kH2DFormatNames = MakeEnumNames<H2DFormat>(
    {{H2DFormat::kU8, "u8"}, {H2DFormat::kF16, "f16"}, {H2DFormat::kF32, "f32"}});
}  // namespace

absl::string_view H2DFormatName(H2DFormat f) { return ElementTypeName(f); }

absl::StatusOr<H2DFormat> ParseH2DFormat(absl::string_view name) {
  if (std::optional<H2DFormat> f = kH2DFormatNames.Parse(name)) return *f;
  return absl::InvalidArgumentError(absl::StrCat("unknown --h2d-format '", Printable(name),
                                                 "' (expected ", kH2DFormatNames.List(), ")"));
}

bool Normalization::is_identity() const {
  for (float m : mean) {
    if (m != 0.0f) return false;
  }
  for (float s : std) {
    if (s != 1.0f) return false;
  }
  return true;
}

absl::Status CheckNormalization(const Normalization& n, uint32_t channels) {
  for (const auto& [what, values] : {std::pair{"mean", &n.mean}, std::pair{"std", &n.std}}) {
    if (values->size() != 1 && values->size() != channels) {
      return absl::InvalidArgumentError(absl::StrCat(
          "normalization ", what, " has ", values->size(), " values; the samples have ", channels,
          channels == 1 ? " channel" : " channels", ", so give 1 value or ", channels));
    }
    for (size_t c = 0; c < values->size(); ++c) {
      const float v = (*values)[c];
      if (!std::isfinite(v) || (values == &n.std && v == 0.0f)) {
        return absl::InvalidArgumentError(absl::StrCat("normalization ", what, " value ", v,
                                                       " (channel ", c, ") must be finite",
                                                       values == &n.std ? " and non-zero" : ""));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
