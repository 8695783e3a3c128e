// Constants of the shard format. The format is specified byte by byte in
// docs/formats/shard.md; keep the two in step.
#ifndef SLUICE_STORAGE_SHARD_FORMAT_H_
#define SLUICE_STORAGE_SHARD_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

inline constexpr char kShardMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'H'};
inline constexpr char kFooterMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'F', 'T'};
inline constexpr uint32_t kShardVersion = 1;  // fixed-size records
// Variable-size records: encoded images (docs/formats/shard.md, "Version 2").
inline constexpr uint32_t kShardVersionVariable = 2;
// The largest encoded sample (2^28 bytes, 256 MiB): a 4k 16-bit RGBA PNG stored without
// compression is 66 MB.
inline constexpr uint32_t kMaxEncodedSampleBytes = 1u << 28;
// The largest frame_bytes option (a frame's raw size stays below 2^32 with one oversized record).
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 31;
inline constexpr uint32_t kDefaultFrameBytes = 4u << 20;
inline constexpr uint32_t kShardHeaderSize = 64;
inline constexpr uint32_t kIndexEntrySize = 40;
inline constexpr uint32_t kFooterSize = 32;
inline constexpr uint32_t kFooterChecksummedPrefix = 16;
inline constexpr char kManifestSuffix[] = ".manifest.json";
inline constexpr char kShardSuffix[] = ".shard";

enum class SampleDType : uint8_t { kU8 = 1, kF32 = 2 };
enum class LabelDType : uint8_t { kU8 = 1, kI32 = 2 };

inline constexpr size_t SampleDTypeSize(SampleDType t) { return t == SampleDType::kU8 ? 1 : 4; }
inline constexpr size_t LabelDTypeSize(LabelDType t) { return t == LabelDType::kU8 ? 1 : 4; }
// The largest label a split may hold: 2^31 - 2, so that num_classes (the largest label + 1 at
// least) fits its bound of 2^31 - 1 (label.num_classes, docs/formats/shard.md).
inline constexpr uint32_t kMaxLabel = 2147483646;
// How a sample is stored: a fixed-size raw array (version 1), or an encoded image file's bytes
// (version 2; the code is the header's sample_encoding byte).
enum class SampleEncoding : uint8_t { kRaw = 0, kJpeg = 1, kPng = 2, kImage = 3 };
// How a frame's raw bytes are stored (version 2's codec byte; version 1 is always zstd).
enum class FrameCodec : uint8_t { kNone = 0, kZstd = 1 };

absl::string_view SampleDTypeName(SampleDType t);  // "u8" | "f32"
absl::string_view LabelDTypeName(LabelDType t);    // "u8" | "i32"
absl::StatusOr<SampleDType> ParseSampleDType(absl::string_view name);
absl::StatusOr<LabelDType> ParseLabelDType(absl::string_view name);
absl::string_view SampleEncodingName(SampleEncoding e);  // "raw" | "jpeg" | "png" | "image"
absl::StatusOr<SampleEncoding> ParseSampleEncoding(absl::string_view name);  // not "raw"
absl::string_view FrameCodecName(FrameCodec c);                              // "none" | "zstd"
absl::StatusOr<FrameCodec> ParseFrameCodec(absl::string_view name);
// The encoding of `bytes` from its signature (JPEG FF D8 FF, PNG 89 50 4E 47 0D 0A 1A 0A), or
// nullopt for anything else (a zero-byte file included). Decodes nothing.
std::optional<SampleEncoding> SniffImageEncoding(absl::string_view bytes);
// The encoding of a split whose samples have encodings `a` and `b`: equal ones stay, a mix of
// JPEG and PNG is kImage.
SampleEncoding CombineEncodings(SampleEncoding a, SampleEncoding b);

// The shape and types of one record; identical for every shard of a split.
// Encoded records (encoding != kRaw) are variable-size byte strings: their height, width and
// channels are 0 (not a sample shape) and sample_values()/sample_bytes() do not apply; their
// sizes are in the frame (FrameView::sample_size).
struct RecordSpec {
  SampleDType sample_dtype = SampleDType::kU8;
  LabelDType label_dtype = LabelDType::kU8;
  uint32_t height = 0;
  uint32_t width = 0;
  uint32_t channels = 1;
  SampleEncoding encoding = SampleEncoding::kRaw;

  bool encoded() const { return encoding != SampleEncoding::kRaw; }

  size_t sample_values() const { return size_t{height} * width * channels; }
  size_t sample_bytes() const { return sample_values() * SampleDTypeSize(sample_dtype); }
  size_t label_bytes() const { return LabelDTypeSize(label_dtype); }
  size_t record_bytes() const { return sample_bytes() + label_bytes(); }
  bool operator==(const RecordSpec&) const = default;
};

// The largest image of an encoded split, from the files' headers at ingestion (manifest
// sample.max_width, max_height, max_pixels; docs/formats/shard.md). Each field is the maximum
// over the split's records on its own, so max_pixels <= max_width * max_height.
struct ImageSizeBound {
  uint32_t max_width = 0;
  uint32_t max_height = 0;
  uint64_t max_pixels = 0;
  bool operator==(const ImageSizeBound&) const = default;
};

// One entry of a shard's footer index (docs/formats/shard.md, "Index entry").
struct FrameInfo {
  uint64_t offset = 0;
  uint32_t stored_size = 0;
  uint32_t raw_size = 0;
  uint64_t first_record = 0;  // within the shard
  uint32_t record_count = 0;
  uint64_t checksum = 0;
};

// The decoded header of a shard.
struct ShardHeader {
  RecordSpec spec;
  uint64_t record_count = 0;
  uint64_t first_record = 0;  // within the split
  uint32_t records_per_frame = 0;
  uint32_t frame_count = 0;
  uint32_t shard_index = 0;
  // Version 2 only (encoded records); version 1 is zstd with no per-shard bound.
  FrameCodec codec = FrameCodec::kZstd;
  uint32_t max_sample_bytes = 0;  // the largest sample of the shard

  uint32_t version() const { return spec.encoded() ? kShardVersionVariable : kShardVersion; }
};

// "<split>-<5-digit index>-<xxh3 of the whole file, 16 hex>.shard" (docs/formats/shard.md,
// "Shard file names") and "<split>.manifest.json".
std::string ShardFileName(absl::string_view split, uint32_t shard_index, uint64_t file_xxh3);
// "<split>-<5-digit index>.shard.tmp": where shard `shard_index` is written before its rename.
std::string ShardTempFileName(absl::string_view split, uint32_t shard_index);
std::string ManifestFileName(absl::string_view split);

// The longest file name a split's name is part of: "<split>-<10-digit index>-<16 hex>.shard.tmp"
// (an index past 99999 takes up to 10 digits) is the split plus 38 bytes; "<split>.manifest.json"
// and its ".tmp" are shorter.
inline constexpr size_t kLongestSplitFileSuffix = 1 + 10 + 1 + 16 + sizeof(kShardSuffix) - 1 + 4;
// NAME_MAX (255 bytes on Linux, macOS and every common file system) bounds each of those names.
inline constexpr size_t kMaxFileNameBytes = 255;
// The longest split name (217 bytes), so every file named after it stays within NAME_MAX.
inline constexpr size_t kMaxSplitNameBytes = kMaxFileNameBytes - kLongestSplitFileSuffix;

// The one check of a split name, shared by every writer (WriteDataset, WriteEncodedDataset, so
// sluice.write_dataset; sluice-shard create --split/--holdout-split, export --split) and by the
// manifest reader, so nothing is written that no reader accepts: not empty, not "." or "..", no
// '/', at most kMaxSplitNameBytes bytes, no control character (an ANSI escape would reach every
// terminal that prints it), nothing that is not valid UTF-8 and no invisible or
// direction-changing character (what TerminalSafe, common/printable.h, would change).
// kInvalidArgument quoting it escaped and bounded.
absl::Status CheckSplitName(absl::string_view split);

}  // namespace sluice

#endif  // SLUICE_STORAGE_SHARD_FORMAT_H_
