#include "storage/shard_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice {

absl::string_view SampleDTypeName(SampleDType t) { return t == SampleDType::kU8 ? "u8" : "f32"; }
absl::string_view LabelDTypeName(LabelDType t) { return t == LabelDType::kU8 ? "u8" : "i32"; }

absl::StatusOr<SampleDType> ParseSampleDType(absl::string_view name) {
  if (name == "u8") return SampleDType::kU8;
  if (name == "f32") return SampleDType::kF32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sample dtype \"", name, "\", expected u8 or f32"));
}

absl::StatusOr<LabelDType> ParseLabelDType(absl::string_view name) {
  if (name == "u8") return LabelDType::kU8;
  if (name == "i32") return LabelDType::kI32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown label dtype \"", name, "\", expected u8 or i32"));
}

std::string ShardFileName(absl::string_view split, uint32_t shard_index) {
  return absl::StrFormat("%s-%05d%s", split, shard_index, kShardSuffix);
}

std::string ManifestFileName(absl::string_view split) {
  return absl::StrCat(split, kManifestSuffix);
}

}  // namespace sluice
