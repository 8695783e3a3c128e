#include "storage/shard_format.h"

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/enum_names.h"
#include "common/printable.h"

namespace sluice {

namespace {
constexpr auto kSampleDTypeNames =
    MakeEnumNames<SampleDType>({{SampleDType::kU8, "u8"}, {SampleDType::kF32, "f32"}});
constexpr auto kLabelDTypeNames =
    MakeEnumNames<LabelDType>({{LabelDType::kU8, "u8"}, {LabelDType::kI32, "i32"}});
constexpr auto kSampleEncodingNames =
    MakeEnumNames<SampleEncoding>({{SampleEncoding::kJpeg, "jpeg"},
                                   {SampleEncoding::kPng, "png"},
                                   {SampleEncoding::kImage, "image"}});
constexpr auto kFrameCodecNames =
    MakeEnumNames<FrameCodec>({{FrameCodec::kNone, "none"}, {FrameCodec::kZstd, "zstd"}});

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

absl::string_view SampleEncodingName(SampleEncoding e) {
  return e == SampleEncoding::kRaw ? "raw" : kSampleEncodingNames.Name(e);
}

absl::StatusOr<SampleEncoding> ParseSampleEncoding(absl::string_view name) {
  return ParseDType(kSampleEncodingNames, "sample encoding", name);
}

absl::string_view FrameCodecName(FrameCodec c) { return kFrameCodecNames.Name(c); }

absl::StatusOr<FrameCodec> ParseFrameCodec(absl::string_view name) {
  return ParseDType(kFrameCodecNames, "codec", name);
}

std::optional<SampleEncoding> SniffImageEncoding(absl::string_view bytes) {
  static constexpr char kJpeg[] = {'\xFF', '\xD8', '\xFF'};
  static constexpr char kPng[] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1A', '\n'};
  if (absl::StartsWith(bytes, absl::string_view(kJpeg, sizeof(kJpeg)))) {
    return SampleEncoding::kJpeg;
  }
  if (absl::StartsWith(bytes, absl::string_view(kPng, sizeof(kPng)))) return SampleEncoding::kPng;
  return std::nullopt;
}

SampleEncoding CombineEncodings(SampleEncoding a, SampleEncoding b) {
  return a == b ? a : SampleEncoding::kImage;
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

absl::Status CheckSplitName(absl::string_view split) {
  if (split.size() > kMaxSplitNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("split name \"", Printable(split.substr(0, 40)), "...\": ", split.size(),
                     " bytes, expected at most ", kMaxSplitNameBytes, " (the shard file names add ",
                     kLongestSplitFileSuffix, " bytes to it and a file name holds at most ",
                     kMaxFileNameBytes, ")"));
  }
  // TerminalSafe changes a name exactly when it holds a control character, a byte that is not
  // valid UTF-8 or an invisible character.
  if (split.empty() || split == "." || split == ".." || absl::StrContains(split, '/') ||
      TerminalSafe(split, SIZE_MAX) != split) {
    return absl::InvalidArgumentError(
        absl::StrCat("split name ", QuotedPrintable(split),
                     ": expected a plain name such as train (not '.' or '..'; no '/', control "
                     "characters or invalid UTF-8)"));
  }
  return absl::OkStatus();
}

}  // namespace sluice
