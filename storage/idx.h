// IDX files (the MNIST / Fashion-MNIST format), raw or gzip-compressed, to and from records.
//
// IDX: magic {0, 0, type, ndims}, then ndims big-endian u32 dimensions, then big-endian values.
// Accepted here:
//   images: type 0x08 (u8) or 0x0D (f32), ndims 3 (N, H, W) or 4 (N, H, W, C);
//   labels: type 0x08 (u8) or 0x0C (i32), ndims 1 (N).
// A file starting with the gzip magic (1f 8b) is decompressed first (all members).
// Values come back little-endian, as shards store them (docs/formats/shard.md).
//
// The writer always writes raw (uncompressed) IDX: images with ndims 3 when channels = 1, else
// 4; so u8 or f32 input that was read from raw IDX with ndims 3 (or 4 with C > 1) and u8 / i32
// labels is written back byte-identical (the round trip sluice-shard export relies on).
//
// Errors: kNotFound for a missing file; kDataLoss for a wrong magic, a size that disagrees with
// the dimensions, a truncated or corrupt .gz (messages name the file and what was expected);
// kInvalidArgument when images and labels disagree in count.
// Thread safety: stateless functions, thread safe.
#ifndef SLUICE_STORAGE_IDX_H_
#define SLUICE_STORAGE_IDX_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"

namespace sluice {

inline constexpr uint8_t kIdxTypeU8 = 0x08;
inline constexpr uint8_t kIdxTypeI32 = 0x0C;
inline constexpr uint8_t kIdxTypeF32 = 0x0D;

// Returns `bytes` unchanged unless they start with the gzip magic, else their decompression.
// `path` names errors.
absl::StatusOr<std::string> MaybeGunzip(absl::string_view bytes, const std::string& path);

// Parses the contents of an images and a labels IDX file (raw or gzip) into records.
absl::StatusOr<RecordArrays> ParseIdxPair(absl::string_view images, const std::string& images_path,
                                          absl::string_view labels, const std::string& labels_path);

struct IdxInput {
  RecordArrays records;
  std::vector<SourceEntry> sources;  // images then labels: base name, size, XXH3 as read
};
// Reads and parses two IDX files.
absl::StatusOr<IdxInput> ReadIdxPair(Env* env, const std::string& images_path,
                                     const std::string& labels_path);

// Raw IDX encodings of the samples and labels of `records`.
std::string EncodeIdxImages(const RecordArrays& records);
std::string EncodeIdxLabels(const RecordArrays& records);

// "<prefix>-images-idx<3|4>-<ubyte|float>" and "<prefix>-labels-idx1-<ubyte|int>", so
// `--out DIR/train` reproduces Fashion-MNIST's names (without .gz).
struct IdxPaths {
  std::string images;
  std::string labels;
};
IdxPaths IdxPathsFor(const std::string& prefix, const RecordSpec& spec);

// Writes both files (atomically, each) and returns their paths.
absl::StatusOr<IdxPaths> WriteIdxPair(Env* env, const std::string& prefix,
                                      const RecordArrays& records);

}  // namespace sluice

#endif  // SLUICE_STORAGE_IDX_H_
