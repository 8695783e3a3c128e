#include "engine/backend.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/enum_names.h"
#include "common/printable.h"

namespace sluice {
namespace {
// The first name of each value is its canonical one; "f32" and "f16" are accepted aliases.
constexpr auto kPrecisionNames = MakeEnumNames<Precision>({{Precision::kF32, "fp32"},
                                                           {Precision::kBF16, "bf16"},
                                                           {Precision::kF16, "fp16"},
                                                           {Precision::kF32, "f32"},
                                                           {Precision::kF16, "f16"}});
}  // namespace

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (std::optional<Precision> p = kPrecisionNames.Parse(name)) return *p;
  return absl::InvalidArgumentError(absl::StrCat("--precision: '", Printable(name),
                                                 "' is not one of ", kPrecisionNames.List(", ")));
}

}  // namespace sluice
