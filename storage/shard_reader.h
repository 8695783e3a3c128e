// ShardReader: random access to the frames of one shard file (docs/formats/shard.md).
//
// Open() reads and validates header, index and footer (every check of the format doc's
// "Opening" list). Reading a frame is split in two so the pipeline can run the steps as
// separate stages: ReadStoredFrame() does the I/O, DecodeFrame() verifies the checksum and
// decompresses.
//
// Errors: kDataLoss for corrupt or truncated data, with the message
//   "<path>: frame <i> at byte offset <off>: <what was expected>" (or "<path>: header: ..."),
//   kNotFound / kInternal from the Env for I/O, kOutOfRange for a bad frame index.
// Thread safety: after Open(), all const methods may be called concurrently.
#ifndef SLUICE_STORAGE_SHARD_READER_H_
#define SLUICE_STORAGE_SHARD_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/env.h"
#include "storage/shard_format.h"

namespace sluice {

class ShardReader {
 public:
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(Env* env, const std::string& path);

  const std::string& path() const { return file_->path(); }
  const ShardHeader& header() const { return header_; }
  const RecordSpec& spec() const { return header_.spec; }
  uint64_t record_count() const { return header_.record_count; }
  uint32_t frame_count() const { return header_.frame_count; }
  const std::vector<FrameInfo>& frames() const { return frames_; }
  uint64_t file_size() const { return file_->Size(); }
  // The footer's meta_checksum (XXH3 of header, index and footer prefix, verified at Open): a
  // cheap identity of the shard's whole content, since the index holds every frame's checksum.
  uint64_t meta_checksum() const { return meta_checksum_; }

  // Reads the stored (compressed) bytes of frame `i` into `out` (resized to stored_size).
  absl::Status ReadStoredFrame(uint32_t i, std::string* out) const;
  // The same into `out`, which must hold exactly frames()[i].stored_size bytes: a caller that
  // reuses its buffers pays neither an allocation nor resize()'s zero fill per frame.
  absl::Status ReadStoredFrame(uint32_t i, absl::Span<char> out) const;

  // A hint that frame `i` will be read soon (RandomAccessFile::WillRead): a remote shard starts
  // fetching it. No effect for a local file or an index out of range.
  void WillReadFrame(uint32_t i) const {
    if (i < frames_.size()) file_->WillRead(frames_[i].offset, frames_[i].stored_size);
  }

  // Verifies `stored` against frame `i`'s checksum and decompresses it into `raw`, which must
  // hold exactly frames()[i].raw_size bytes; read raw through FrameView (storage/frame_view.h).
  // A version 2 frame's offset table is checked too (every record's sample within the frame
  // and max_sample_bytes), so FrameView may index it unchecked; a failure names the record.
  // A frame of codec none is copied. `dctx` may be null; passing a per-thread ZSTD_DCtx*
  // avoids an allocation per call.
  absl::Status DecodeFrame(uint32_t i, absl::string_view stored, absl::Span<char> raw,
                           void* dctx = nullptr) const;

  // ReadStoredFrame + DecodeFrame into `raw` (resized).
  absl::Status ReadFrame(uint32_t i, std::string* raw) const;

  // Checks every frame's checksum, decompressed size and record count. Returns the first
  // failure. Does not need to hold more than one frame in memory.
  absl::Status Verify() const;

  // A DataLoss status naming this file, frame `i` and its byte offset.
  absl::Status FrameCorruption(uint32_t i, absl::string_view what) const;

  // The frame holding record `record` of this shard (< record_count()), by binary search over
  // the index: frames of variable-size records hold different counts.
  uint32_t FrameOfRecord(uint64_t record) const;

 private:
  // Checks a decoded version 2 frame's offset table (no-op for version 1).
  absl::Status CheckRecords(uint32_t i, absl::Span<const char> raw) const;

  ShardReader(std::unique_ptr<RandomAccessFile> file, ShardHeader header,
              std::vector<FrameInfo> frames, uint64_t meta_checksum)
      : file_(std::move(file)),
        header_(header),
        frames_(std::move(frames)),
        meta_checksum_(meta_checksum) {}

  std::unique_ptr<RandomAccessFile> file_;
  ShardHeader header_;
  std::vector<FrameInfo> frames_;
  uint64_t meta_checksum_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_STORAGE_SHARD_READER_H_
