// Encoding and decoding of the fixed-size parts of a shard (header, index entry, footer),
// shared by ShardWriter and ShardReader. Byte layouts: docs/formats/shard.md.
// Pure functions; thread safe.
#ifndef SLUICE_STORAGE_INTERNAL_SHARD_LAYOUT_H_
#define SLUICE_STORAGE_INTERNAL_SHARD_LAYOUT_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "common/coding.h"
#include "storage/shard_format.h"

namespace sluice::storage_internal {

inline std::string EncodeHeader(const ShardHeader& h) {
  std::string out(kShardHeaderSize, '\0');
  char* p = out.data();
  std::memcpy(p, kShardMagic, 8);
  EncodeFixed32(p + 8, h.version());
  EncodeFixed32(p + 12, kShardHeaderSize);
  p[16] = static_cast<char>(h.spec.sample_dtype);
  p[17] = static_cast<char>(h.spec.label_dtype);
  if (h.spec.encoded()) {  // version 2: no shape; encoding, codec and the largest sample
    p[18] = static_cast<char>(h.spec.encoding);
    p[19] = static_cast<char>(h.codec);
    EncodeFixed32(p + 20, h.max_sample_bytes);
  } else {
    EncodeFixed32(p + 20, h.spec.height);
    EncodeFixed32(p + 24, h.spec.width);
    EncodeFixed32(p + 28, h.spec.channels);
  }
  EncodeFixed64(p + 32, h.record_count);
  EncodeFixed64(p + 40, h.first_record);
  EncodeFixed32(p + 48, h.records_per_frame);
  EncodeFixed32(p + 52, h.frame_count);
  EncodeFixed32(p + 56, h.shard_index);
  return out;
}

inline void AppendIndexEntry(const FrameInfo& f, std::string* out) {
  PutFixed64(out, f.offset);
  PutFixed32(out, f.stored_size);
  PutFixed32(out, f.raw_size);
  PutFixed64(out, f.first_record);
  PutFixed32(out, f.record_count);
  PutFixed32(out, 0);
  PutFixed64(out, f.checksum);
}

inline FrameInfo DecodeIndexEntry(const char* p) {
  FrameInfo f;
  f.offset = DecodeFixed64(p);
  f.stored_size = DecodeFixed32(p + 8);
  f.raw_size = DecodeFixed32(p + 12);
  f.first_record = DecodeFixed64(p + 16);
  f.record_count = DecodeFixed32(p + 24);
  f.checksum = DecodeFixed64(p + 32);
  return f;
}

// Footer bytes 0..15 (the part covered by meta_checksum).
inline std::string EncodeFooterPrefix(uint64_t index_offset, uint32_t frame_count) {
  std::string out;
  PutFixed64(&out, index_offset);
  PutFixed32(&out, frame_count);
  PutFixed32(&out, 0);
  return out;
}

// Records in frame `i` of a shard of `record_count` records, M per frame.
inline uint32_t FrameRecordCount(uint64_t record_count, uint32_t m, uint32_t i) {
  uint64_t first = uint64_t{i} * m;
  uint64_t left = record_count - first;
  return static_cast<uint32_t>(left < m ? left : m);
}

}  // namespace sluice::storage_internal

#endif  // SLUICE_STORAGE_INTERNAL_SHARD_LAYOUT_H_
