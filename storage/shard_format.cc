#include "storage/shard_format.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/enum_names.h"

namespace sluice {

namespace {
constexpr auto kSampleDTypeNames =
    MakeEnumNames<SampleDType>({{SampleDType::kU8, "u8"}, {SampleDType::kF32, "f32"}});
constexpr auto kLabelDTypeNames =
    MakeEnumNames<LabelDType>({{LabelDType::kU8, "u8"}, {LabelDType::kI32, "i32"}});

// Parse of `names`, or InvalidArgument "unknown <what> "<name>", expected u8 or f32".
template <typename E, size_t N>
absl::StatusOr<E> ParseDType(const EnumNames<E, N>& names, absl::string_view what,
                             absl::string_view name) {
  if (std::optional<E> t = names.Parse(name)) return *t;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " \"", name, "\", expected ", names.List()));
}
}  // namespace

absl::string_view SampleDTypeName(SampleDType t) { return kSampleDTypeNames.Name(t); }
absl::string_view LabelDTypeName(LabelDType t) { return kLabelDTypeNames.Name(t); }

absl::StatusOr<SampleDType> ParseSampleDType(absl::string_view name) {
  return ParseDType(kSampleDTypeNames, "sample dtype", name);
}

absl::StatusOr<LabelDType> ParseLabelDType(absl::string_view name) {
  return ParseDType(kLabelDTypeNames, "label dtype", name);
}

std::string ShardFileName(absl::string_view split, uint32_t shard_index, uint64_t file_xxh3) {
  return absl::StrFormat("%s-%05u-%016x%s", split, shard_index, file_xxh3, kShardSuffix);
}

std::string ShardTempFileName(absl::string_view split, uint32_t shard_index) {
  return absl::StrFormat("%s-%05u%s.tmp", split, shard_index, kShardSuffix);
}

std::string ManifestFileName(absl::string_view split) {
  return absl::StrCat(split, kManifestSuffix);
}

}  // namespace sluice
