// ShardWriter: writes one shard file (docs/formats/shard.md) from records appended in order.
// DatasetWriter-level functions (dataset_writer.h) cut a split into shards and write the
// manifest; most callers want those.
//
// Errors: kInvalidArgument for a bad spec/options or a record of the wrong size, and the Env's
// status for I/O (kResourceExhausted for a full disk).
// Thread safety: one thread at a time. Compression of frames may be done by the caller in
// parallel through CompressFrame(), which is thread safe.
#ifndef SLUICE_STORAGE_SHARD_WRITER_H_
#define SLUICE_STORAGE_SHARD_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "storage/shard_format.h"

namespace sluice {

// Compresses one frame's raw bytes (samples then labels) into a standalone zstd frame.
absl::StatusOr<std::string> CompressFrame(absl::string_view raw, int zstd_level);

// Builds the frame_raw layout (all samples, then all labels) from `count` records given as
// separate sample and label arrays.
std::string MakeFrameRaw(const RecordSpec& spec, const char* samples, const char* labels,
                         uint32_t count);

class ShardWriter {
 public:
  // `file` receives the bytes; the caller handles temp names and renames.
  ShardWriter(WritableFile* file, const ShardHeader& header);

  // Appends the next frame, already compressed (codec none: its raw bytes). `raw_size` and
  // `record_count` must match the header's frame layout: version 1, M records per frame but
  // the last; version 2, 1..M records per frame, adding up to the header's record_count.
  absl::Status AddCompressedFrame(absl::string_view stored, uint32_t raw_size,
                                  uint32_t record_count);
  // Writes index and footer. Requires header.frame_count frames.
  absl::Status Finish();
  uint64_t bytes_written() const { return offset_; }
  // XXH3 of the whole file written so far (valid after Finish()).
  uint64_t file_checksum() const;
  // The footer's meta_checksum: XXH3 of header, index and footer prefix (valid after Finish()).
  uint64_t meta_checksum() const { return meta_checksum_; }

 private:
  absl::Status CheckFrameLayout(absl::string_view stored, uint32_t raw_size,
                                uint32_t record_count) const;

  WritableFile* file_;
  ShardHeader header_;
  uint64_t offset_ = 0;
  std::string header_bytes_;
  std::string index_bytes_;
  uint32_t frames_added_ = 0;
  uint64_t records_added_ = 0;
  uint64_t meta_checksum_ = 0;
  std::shared_ptr<void> file_hash_;  // Xxh3Stream
};

}  // namespace sluice

#endif  // SLUICE_STORAGE_SHARD_WRITER_H_
