#include "storage/shard_reader.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "common/status_macros.h"
#include "storage/frame_view.h"
#include "storage/internal/shard_layout.h"

namespace sluice {
namespace {

using storage_internal::DecodeIndexEntry;
using storage_internal::FrameRecordCount;

absl::Status HeaderError(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": header: ", what));
}
absl::Status FooterError(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat(path, ": footer: ", what));
}

// Reads exactly n bytes at offset; a short read means the file changed under us.
absl::Status ReadExactly(const RandomAccessFile& f, uint64_t offset, size_t n, char* dst) {
  ASSIGN_OR_RETURN(size_t got, f.Read(offset, n, dst));
  if (got != n) {
    return absl::DataLossError(absl::StrCat(f.path(), ": short read at byte offset ", offset,
                                            ": expected ", n, " bytes, got ", got));
  }
  return absl::OkStatus();
}

struct DCtxHolder {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~DCtxHolder() { ZSTD_freeDCtx(ctx); }
};

}  // namespace

namespace {

// The undecoded metadata of a shard: its header, index and footer bytes.
struct ShardMeta {
  std::string header;
  char footer[kFooterSize];
  std::string index;
  uint64_t index_offset = 0;
  uint32_t footer_frames = 0;
};

// Steps 1-2: size, footer and header magic, version and header size.
absl::Status ReadHeaderAndFooter(const RandomAccessFile& file, const std::string& path,
                                 uint64_t size, ShardMeta* meta) {
  // 1. Size, footer magic, header magic.
  if (size < kShardHeaderSize + kFooterSize) {
    return absl::DataLossError(absl::StrCat(path, ": file is ", size, " bytes, expected at least ",
                                            kShardHeaderSize + kFooterSize,
                                            " (header and footer); truncated?"));
  }
  char* footer = meta->footer;
  RETURN_IF_ERROR(ReadExactly(file, size - kFooterSize, kFooterSize, footer));
  if (std::memcmp(footer + 24, kFooterMagic, 8) != 0) {
    return FooterError(path, "magic is not SLUICEFT (truncated or not a sluice shard)");
  }
  meta->header.assign(kShardHeaderSize, '\0');
  RETURN_IF_ERROR(ReadExactly(file, 0, kShardHeaderSize, meta->header.data()));
  const char* h = meta->header.data();
  if (std::memcmp(h, kShardMagic, 8) != 0) {
    return HeaderError(path, "magic is not SLUICESH (not a sluice shard)");
  }
  // 2. Version and header size.
  const uint32_t version = DecodeFixed32(h + 8);
  if (version != kShardVersion && version != kShardVersionVariable) {
    return HeaderError(path, absl::StrCat("unsupported version ", version, ", expected ",
                                          kShardVersion, " or ", kShardVersionVariable));
  }
  if (DecodeFixed32(h + 12) != kShardHeaderSize) {
    return HeaderError(
        path, absl::StrCat("header_size ", DecodeFixed32(h + 12), ", expected ", kShardHeaderSize));
  }

  return absl::OkStatus();
}

// Step 3: the index must fit the file as the footer places it; meta_checksum covers header,
// index and footer.
absl::Status ReadIndexAndCheckMeta(const RandomAccessFile& file, const std::string& path,
                                   uint64_t size, ShardMeta* meta) {
  const char* footer = meta->footer;
  // 3. meta_checksum. The index's position comes from the footer, so check that it fits the
  // file before reading it; a mismatch is what truncation or appended bytes look like.
  const uint64_t index_offset = meta->index_offset = DecodeFixed64(footer);
  const uint32_t footer_frames = meta->footer_frames = DecodeFixed32(footer + 8);
  const uint64_t index_bytes = uint64_t{kIndexEntrySize} * footer_frames;
  if (size < kShardHeaderSize + index_bytes + kFooterSize ||
      index_offset != size - kFooterSize - index_bytes) {
    return FooterError(
        path,
        absl::StrCat("index_offset ", index_offset, " with ", footer_frames,
                     " frames does not fit a file of ", size, " bytes; expected index_offset ",
                     size >= kFooterSize + index_bytes ? size - kFooterSize - index_bytes : 0));
  }
  meta->index.assign(index_bytes, '\0');
  RETURN_IF_ERROR(ReadExactly(file, index_offset, meta->index.size(), meta->index.data()));
  Xxh3Stream digest;
  digest.Update(meta->header);
  digest.Update(meta->index);
  digest.Update(absl::string_view(footer, kFooterChecksummedPrefix));
  const uint64_t stored_meta = DecodeFixed64(footer + 16);
  if (digest.Digest() != stored_meta) {
    return FooterError(path, absl::StrCat("meta_checksum ", ChecksumToHex(stored_meta),
                                          " does not match header, index and footer (computed ",
                                          ChecksumToHex(digest.Digest()), ")"));
  }

  return absl::OkStatus();
}

// Step 4 for version 2 (docs/formats/shard.md, "Version 2"): encoding, codec and the largest
// sample instead of a shape; frames hold 1..M records each.
absl::Status DecodeVariableHeader(const std::string& path, const char* h, ShardHeader* hdr) {
  if (hdr->spec.sample_dtype != SampleDType::kU8) {
    return HeaderError(path, "sample_dtype of a version 2 shard must be 1 (u8: bytes)");
  }
  const uint8_t encoding = static_cast<uint8_t>(h[18]);
  const uint8_t codec = static_cast<uint8_t>(h[19]);
  if (encoding < 1 || encoding > 3) {
    return HeaderError(path, absl::StrCat("unknown sample_encoding ", encoding,
                                          ", expected 1 (jpeg), 2 (png) or 3 (image)"));
  }
  if (codec > 1) {
    return HeaderError(path,
                       absl::StrCat("unknown codec ", codec, ", expected 0 (none) or 1 (zstd)"));
  }
  hdr->spec.encoding = static_cast<SampleEncoding>(encoding);
  hdr->codec = static_cast<FrameCodec>(codec);
  hdr->max_sample_bytes = DecodeFixed32(h + 20);
  if (hdr->max_sample_bytes == 0 || hdr->max_sample_bytes > kMaxEncodedSampleBytes) {
    return HeaderError(path, absl::StrCat("max_sample_bytes ", hdr->max_sample_bytes,
                                          ", expected in [1, ", kMaxEncodedSampleBytes, "]"));
  }
  if (DecodeFixed32(h + 24) != 0 || DecodeFixed32(h + 28) != 0 || DecodeFixed32(h + 60) != 0) {
    return HeaderError(path, "reserved fields are not 0");
  }
  hdr->spec.height = hdr->spec.width = hdr->spec.channels = 0;
  return absl::OkStatus();
}

// Step 4 for version 1: reserved fields, the shape, and M records per frame within 2^32 - 1.
absl::Status DecodeFixedHeader(const std::string& path, const char* h, ShardHeader* hdr) {
  hdr->spec.height = DecodeFixed32(h + 20);
  hdr->spec.width = DecodeFixed32(h + 24);
  hdr->spec.channels = DecodeFixed32(h + 28);
  if (DecodeFixed16(h + 18) != 0 || DecodeFixed32(h + 60) != 0) {
    return HeaderError(path, "reserved fields are not 0");
  }
  if (hdr->spec.height == 0 || hdr->spec.width == 0 || hdr->spec.channels == 0) {
    return HeaderError(path, absl::StrCat("dimensions ", hdr->spec.height, "x", hdr->spec.width,
                                          "x", hdr->spec.channels, ", expected each >= 1"));
  }
  // raw_size is a u32, so M records (a whole frame) must fit in 2^32 - 1 bytes. Three u32
  // dimensions can overflow 64 bits, hence the checked multiplications.
  uint64_t frame_bytes = 0;
  if (__builtin_mul_overflow(uint64_t{hdr->spec.height}, hdr->spec.width, &frame_bytes) ||
      __builtin_mul_overflow(frame_bytes, uint64_t{hdr->spec.channels}, &frame_bytes) ||
      __builtin_mul_overflow(frame_bytes, SampleDTypeSize(hdr->spec.sample_dtype), &frame_bytes) ||
      __builtin_add_overflow(frame_bytes, LabelDTypeSize(hdr->spec.label_dtype), &frame_bytes) ||
      __builtin_mul_overflow(frame_bytes, uint64_t{hdr->records_per_frame}, &frame_bytes) ||
      frame_bytes > UINT32_MAX) {
    return HeaderError(path, "records_per_frame x record size exceeds 2^32 - 1 bytes");
  }
  return absl::OkStatus();
}

// Step 4: the header's fields, checked against each other and the footer.
absl::StatusOr<ShardHeader> DecodeHeader(const std::string& path, const ShardMeta& meta) {
  const char* h = meta.header.data();
  const char* footer = meta.footer;
  const uint32_t footer_frames = meta.footer_frames;
  const bool variable = DecodeFixed32(h + 8) == kShardVersionVariable;
  ShardHeader hdr;
  const uint8_t sdt = static_cast<uint8_t>(h[16]);
  const uint8_t ldt = static_cast<uint8_t>(h[17]);
  if (sdt != 1 && sdt != 2) {
    return HeaderError(path, absl::StrCat("unknown sample_dtype ", sdt, ", expected 1 or 2"));
  }
  if (ldt != 1 && ldt != 2) {
    return HeaderError(path, absl::StrCat("unknown label_dtype ", ldt, ", expected 1 or 2"));
  }
  hdr.spec.sample_dtype = static_cast<SampleDType>(sdt);
  hdr.spec.label_dtype = static_cast<LabelDType>(ldt);
  hdr.record_count = DecodeFixed64(h + 32);
  hdr.first_record = DecodeFixed64(h + 40);
  hdr.records_per_frame = DecodeFixed32(h + 48);
  hdr.frame_count = DecodeFixed32(h + 52);
  hdr.shard_index = DecodeFixed32(h + 56);
  if (DecodeFixed32(footer + 12) != 0) return FooterError(path, "reserved field is not 0");
  RETURN_IF_ERROR(variable ? DecodeVariableHeader(path, h, &hdr)
                           : DecodeFixedHeader(path, h, &hdr));
  if (hdr.record_count == 0) return HeaderError(path, "record_count 0, expected >= 1");
  if (hdr.records_per_frame == 0) return HeaderError(path, "records_per_frame 0, expected >= 1");
  const uint64_t fewest_frames =
      (hdr.record_count + hdr.records_per_frame - 1) / hdr.records_per_frame;
  // Fixed-size frames hold exactly M records but the last; variable-size ones 1..M each.
  const uint64_t most_frames = variable ? hdr.record_count : fewest_frames;
  if (hdr.frame_count < fewest_frames || hdr.frame_count > most_frames ||
      footer_frames != hdr.frame_count) {
    return HeaderError(
        path, absl::StrCat("frame_count ", hdr.frame_count, " (footer ", footer_frames,
                           "), expected ", variable ? "at least " : "", "ceil(", hdr.record_count,
                           "/", hdr.records_per_frame, ") = ", fewest_frames,
                           variable ? absl::StrCat(" and at most ", hdr.record_count) : ""));
  }
  return hdr;
}

// Step 5 for a version 2 entry: it starts at `next_record`, holds 1..M records, and its
// raw_size fits its records' offsets, labels and samples of 1..max_sample_bytes bytes.
template <typename Bad>
absl::Status CheckVariableEntry(const ShardHeader& hdr, const FrameInfo& f, uint64_t next_record,
                                const Bad& bad) {
  if (f.first_record != next_record || f.record_count == 0 ||
      f.record_count > hdr.records_per_frame || f.record_count > hdr.record_count - next_record) {
    return bad(absl::StrCat("records [", f.first_record, ", +", f.record_count, "), expected [",
                            next_record, ", +1..", hdr.records_per_frame, ") within the shard's ",
                            hdr.record_count));
  }
  const uint64_t overhead = FrameView::VariableOverheadBytes(hdr.spec, f.record_count);
  const uint64_t least = overhead + f.record_count;
  const uint64_t most = overhead + uint64_t{f.record_count} * hdr.max_sample_bytes;
  if (f.raw_size < least || f.raw_size > most) {
    return bad(absl::StrCat("raw_size ", f.raw_size, ", expected in [", least, ", ", most, "] for ",
                            f.record_count, " records of 1 to ", hdr.max_sample_bytes,
                            " sample bytes"));
  }
  if (hdr.codec == FrameCodec::kNone && f.stored_size != f.raw_size) {
    return bad(absl::StrCat("stored_size ", f.stored_size, " of an uncompressed frame, expected ",
                            "raw_size ", f.raw_size));
  }
  return absl::OkStatus();
}

// Step 5: index entries: frames back to back from the header to the index.
absl::StatusOr<std::vector<FrameInfo>> DecodeIndex(const std::string& path, const ShardHeader& hdr,
                                                   const ShardMeta& meta) {
  const std::string& index = meta.index;
  const uint64_t index_offset = meta.index_offset;
  std::vector<FrameInfo> frames(hdr.frame_count);
  uint64_t expected_offset = kShardHeaderSize;
  uint64_t next_record = 0;  // the first record of frame i within the shard
  for (uint32_t i = 0; i < hdr.frame_count; ++i) {
    const char* e = index.data() + uint64_t{i} * kIndexEntrySize;
    FrameInfo f = DecodeIndexEntry(e);
    auto bad = [&](absl::string_view what) {
      return absl::DataLossError(
          absl::StrCat(path, ": frame ", i, " at byte offset ", f.offset, ": ", what));
    };
    if (f.offset != expected_offset) {
      return bad(absl::StrCat("index says offset ", f.offset, ", expected ", expected_offset,
                              " (frames are back to back)"));
    }
    if (f.stored_size == 0 || f.offset + f.stored_size > index_offset) {
      return bad(
          absl::StrCat("stored_size ", f.stored_size, " runs past the index at ", index_offset));
    }
    if (hdr.spec.encoded()) {
      RETURN_IF_ERROR(CheckVariableEntry(hdr, f, next_record, bad));
    } else {
      const uint32_t records = FrameRecordCount(hdr.record_count, hdr.records_per_frame, i);
      if (f.first_record != next_record || f.record_count != records) {
        return bad(absl::StrCat("records [", f.first_record, ", +", f.record_count, "), expected [",
                                next_record, ", +", records, ")"));
      }
      const uint64_t raw_size = FrameView::ExpectedBytes(hdr.spec, records);
      if (f.raw_size != raw_size) {
        return bad(absl::StrCat("raw_size ", f.raw_size, ", expected ", raw_size));
      }
    }
    next_record += f.record_count;
    if (DecodeFixed32(e + 28) != 0) return bad("reserved index field is not 0");
    expected_offset = f.offset + f.stored_size;
    frames[i] = f;
  }
  if (expected_offset != index_offset) {
    return absl::DataLossError(absl::StrCat(
        path, ": frame ", hdr.frame_count - 1, " at byte offset ", frames.back().offset,
        ": ends at ", expected_offset, ", expected the index at ", index_offset));
  }
  if (next_record != hdr.record_count) {
    return absl::DataLossError(absl::StrCat(path, ": index: frames hold ", next_record,
                                            " records, header record_count ", hdr.record_count));
  }
  return frames;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  const uint64_t size = file->Size();
  ShardMeta meta;
  RETURN_IF_ERROR(ReadHeaderAndFooter(*file, path, size, &meta));
  RETURN_IF_ERROR(ReadIndexAndCheckMeta(*file, path, size, &meta));
  ASSIGN_OR_RETURN(ShardHeader hdr, DecodeHeader(path, meta));
  ASSIGN_OR_RETURN(std::vector<FrameInfo> frames, DecodeIndex(path, hdr, meta));
  return std::unique_ptr<ShardReader>(
      new ShardReader(std::move(file), hdr, std::move(frames), DecodeFixed64(meta.footer + 16)));
}

absl::Status ShardReader::FrameCorruption(uint32_t i, absl::string_view what) const {
  const uint64_t off = i < frames_.size() ? frames_[i].offset : 0;
  return absl::DataLossError(
      absl::StrCat(path(), ": frame ", i, " at byte offset ", off, ": ", what));
}

absl::Status ShardReader::ReadStoredFrame(uint32_t i, std::string* out) const {
  if (i >= frames_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat(path(), ": frame ", i, " requested, shard has ", frames_.size()));
  }
  out->resize(frames_[i].stored_size);
  return ReadStoredFrame(i, absl::MakeSpan(out->data(), out->size()));
}

absl::Status ShardReader::ReadStoredFrame(uint32_t i, absl::Span<char> out) const {
  if (i >= frames_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat(path(), ": frame ", i, " requested, shard has ", frames_.size()));
  }
  const FrameInfo& f = frames_[i];
  if (out.size() != f.stored_size) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": frame ", i, ": buffer of ",
                                                   out.size(), " bytes, expected ", f.stored_size));
  }
  ASSIGN_OR_RETURN(size_t got, file_->Read(f.offset, f.stored_size, out.data()));
  if (got != f.stored_size) {
    return FrameCorruption(
        i, absl::StrCat("short read: expected ", f.stored_size, " bytes, got ", got));
  }
  return absl::OkStatus();
}

absl::Status ShardReader::DecodeFrame(uint32_t i, absl::string_view stored, absl::Span<char> raw,
                                      void* dctx) const {
  if (i >= frames_.size()) {
    return absl::OutOfRangeError(
        absl::StrCat(path(), ": frame ", i, " requested, shard has ", frames_.size()));
  }
  const FrameInfo& f = frames_[i];
  if (raw.size() != f.raw_size) {
    return absl::InvalidArgumentError(absl::StrCat(path(), ": frame ", i, ": output buffer of ",
                                                   raw.size(), " bytes, expected ", f.raw_size));
  }
  if (stored.size() != f.stored_size) {
    return FrameCorruption(
        i, absl::StrCat("stored size ", stored.size(), ", expected ", f.stored_size));
  }
  // Checksum first: a corrupt frame never reaches the decompressor.
  const uint64_t sum = Xxh3(stored);
  if (sum != f.checksum) {
    return FrameCorruption(
        i, absl::StrCat("checksum ", ChecksumToHex(sum), ", expected ", ChecksumToHex(f.checksum)));
  }
  if (header_.codec == FrameCodec::kNone) {
    std::memcpy(raw.data(), stored.data(), stored.size());  // stored_size = raw_size (Open)
    return CheckRecords(i, raw);
  }
  const unsigned long long content = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (content != f.raw_size) {
    return FrameCorruption(i,
                           absl::StrCat("zstd content size ",
                                        content == ZSTD_CONTENTSIZE_UNKNOWN ? "unknown"
                                        : content == ZSTD_CONTENTSIZE_ERROR ? "unreadable"
                                                                            : absl::StrCat(content),
                                        ", expected ", f.raw_size));
  }
  thread_local DCtxHolder local;
  ZSTD_DCtx* ctx = dctx != nullptr ? static_cast<ZSTD_DCtx*>(dctx) : local.ctx;
  const size_t n = ZSTD_decompressDCtx(ctx, raw.data(), raw.size(), stored.data(), stored.size());
  if (ZSTD_isError(n)) {
    return FrameCorruption(i, absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
  }
  if (n != f.raw_size) {
    return FrameCorruption(i, absl::StrCat("decompressed to ", n, " bytes, expected ", f.raw_size));
  }
  return CheckRecords(i, raw);
}

absl::Status ShardReader::CheckRecords(uint32_t i, absl::Span<const char> raw) const {
  if (!header_.spec.encoded()) return absl::OkStatus();  // fixed-size: the size says it all
  const FrameInfo& f = frames_[i];
  std::optional<VariableFrameError> bad =
      CheckVariableFrame(header_.spec, f.record_count, absl::string_view(raw.data(), raw.size()),
                         header_.max_sample_bytes);
  if (!bad) return absl::OkStatus();
  return FrameCorruption(
      i, absl::StrCat("record ", bad->record, " (record ", f.first_record + bad->record,
                      " of the shard): ", bad->what));
}

uint32_t ShardReader::FrameOfRecord(uint64_t record) const {
  // The last frame whose first_record <= record.
  auto it = std::upper_bound(frames_.begin(), frames_.end(), record,
                             [](uint64_t r, const FrameInfo& f) { return r < f.first_record; });
  return static_cast<uint32_t>(it - frames_.begin()) - 1;
}

absl::Status ShardReader::ReadFrame(uint32_t i, std::string* raw) const {
  std::string stored;
  RETURN_IF_ERROR(ReadStoredFrame(i, &stored));
  raw->resize(i < frames_.size() ? frames_[i].raw_size : 0);
  return DecodeFrame(i, stored, absl::MakeSpan(raw->data(), raw->size()));
}

absl::Status ShardReader::Verify() const {
  std::string stored;
  std::string raw;
  for (uint32_t i = 0; i < frames_.size(); ++i) {
    RETURN_IF_ERROR(ReadStoredFrame(i, &stored));
    raw.resize(frames_[i].raw_size);
    RETURN_IF_ERROR(DecodeFrame(i, stored, absl::MakeSpan(raw.data(), raw.size())));
  }
  return absl::OkStatus();
}

}  // namespace sluice
