#include "engine/backend.h"

#include "absl/strings/str_cat.h"

namespace sluice {

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  if (name == "fp32" || name == "f32") return Precision::kF32;
  if (name == "bf16") return Precision::kBF16;
  if (name == "fp16" || name == "f16") return Precision::kF16;
  return absl::InvalidArgumentError(
      absl::StrCat("--precision: '", name, "' is not one of fp32, bf16, fp16"));
}

}  // namespace sluice
