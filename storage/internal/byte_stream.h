// ByteStream: sequential reads from a buffer holding raw bytes or gzip data (all members),
// inflating on the fly so callers can decompress straight into their final buffer (the IDX
// reader fills a 47 MB sample array without an intermediate copy).
//
// Errors: kDataLoss "<path>: truncated .gz: ..." / "<path>: corrupt .gz: corrupt deflate stream
// at compressed byte N: <zlib message> (zlib Z_DATA_ERROR -3); ..." / "<path>: corrupt .gz: N
// trailing bytes after the gzip stream".
// Thread safety: one thread at a time. Does not own the input bytes.
#ifndef SLUICE_STORAGE_INTERNAL_BYTE_STREAM_H_
#define SLUICE_STORAGE_INTERNAL_BYTE_STREAM_H_

#include <zlib.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::storage_internal {

class ByteStream {
 public:
  ByteStream(absl::string_view bytes, std::string path);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  bool gzip() const { return gzip_; }
  // An upper bound on the bytes the stream can still produce (deflate expands at most 1032:1),
  // so a caller can refuse absurd sizes before allocating.
  uint64_t MaxRemaining() const;
  // Reads up to n bytes into dst; fewer only at the end of the data.
  absl::StatusOr<size_t> Read(char* dst, size_t n);
  // True when no byte is left. A gzip stream is inflated to its end (the bytes are lost), so a
  // corrupt deflate stream or CRC is reported as such rather than as extra bytes.
  absl::StatusOr<bool> AtEnd();

 private:
  absl::Status NextMember();

  absl::string_view in_;
  std::string path_;
  bool gzip_ = false;
  size_t pos_ = 0;  // raw: read position; gzip: bytes of in_ consumed by zlib
  bool zinit_ = false;
  bool member_done_ = false;
  z_stream zs_{};
};

}  // namespace sluice::storage_internal

#endif  // SLUICE_STORAGE_INTERNAL_BYTE_STREAM_H_
