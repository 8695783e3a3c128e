#include "storage/shard_writer.h"

// ZSTD_c_literalCompressionMode is in zstd's "experimental" section (stable since 1.5.1).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "storage/frame_view.h"
#include "storage/internal/shard_layout.h"

namespace sluice {
namespace {

Xxh3Stream* FileHash(const std::shared_ptr<void>& p) { return static_cast<Xxh3Stream*>(p.get()); }

// One compression context per thread: creating a ZSTD_CCtx costs more than compressing a
// small frame, and contexts are not thread safe.
struct CCtxHolder {
  ZSTD_CCtx* ctx = ZSTD_createCCtx();
  int level = INT_MIN;  // the level ctx is configured for; INT_MIN: not yet
  ~CCtxHolder() { ZSTD_freeCCtx(ctx); }
};

}  // namespace

absl::StatusOr<std::string> CompressFrame(absl::string_view raw, int zstd_level) {
  thread_local CCtxHolder holder;
  ZSTD_CCtx* ctx = holder.ctx;
  if (ctx == nullptr) return absl::ResourceExhaustedError("ZSTD_createCCtx failed");
  // Parameters are set once per thread and level, and only the session is reset per frame:
  // resetting the parameters too makes zstd clear its match tables (~1 MB of memset per 200 KB
  // frame at level 3). A frame's bytes still depend only on its input and the level (zstd
  // invalidates old table entries by index); tests compare outputs across thread counts.
  if (holder.level != zstd_level) {
    ZSTD_CCtx_reset(ctx, ZSTD_reset_session_and_parameters);
    holder.level = INT_MIN;
    // Parameters are explicit (and zstd's own worker threads left off) so the bytes depend
    // only on the input and the level: the format promises byte-identical output.
    size_t r = ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, zstd_level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(ctx, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(ctx, ZSTD_c_checksumFlag, 0);
    // Literals are stored raw, not Huffman-coded: on Fashion-MNIST that costs ~2% of ratio and
    // makes decompression ~1.5x faster, and decompression is what every epoch pays
    // (docs/formats/shard.md "Frames", docs/benchmarks.md).
    if (!ZSTD_isError(r)) {
      r = ZSTD_CCtx_setParameter(ctx, ZSTD_c_literalCompressionMode, ZSTD_ps_disable);
    }
    if (ZSTD_isError(r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zstd level ", zstd_level, ": ", ZSTD_getErrorName(r)));
    }
    holder.level = zstd_level;
  } else {
    ZSTD_CCtx_reset(ctx, ZSTD_reset_session_only);
  }
  // Compress into a reused, uninitialized per-thread buffer and copy out the exact bytes: a
  // fresh zero-filled compressBound()-sized string per frame cost more (memset + page faults)
  // than the compression of a 200 KB frame itself.
  thread_local std::unique_ptr<char[]> scratch;
  thread_local size_t scratch_size = 0;
  const size_t bound = ZSTD_compressBound(raw.size());
  if (scratch_size < bound) {
    scratch.reset(new char[bound]);
    scratch_size = bound;
  }
  size_t n = ZSTD_compress2(ctx, scratch.get(), bound, raw.data(), raw.size());
  if (ZSTD_isError(n)) {
    return absl::InternalError(absl::StrCat("zstd compression failed: ", ZSTD_getErrorName(n)));
  }
  return std::string(scratch.get(), n);
}

std::string MakeFrameRaw(const RecordSpec& spec, const char* samples, const char* labels,
                         uint32_t count) {
  std::string raw;
  raw.reserve(FrameView::ExpectedBytes(spec, count));
  AppendFrameRaw(spec, samples, labels, count, &raw);
  return raw;
}

ShardWriter::ShardWriter(WritableFile* file, const ShardHeader& header)
    : file_(file),
      header_(header),
      header_bytes_(storage_internal::EncodeHeader(header)),
      file_hash_(std::make_shared<Xxh3Stream>()) {}

absl::Status ShardWriter::AddCompressedFrame(absl::string_view stored, uint32_t raw_size,
                                             uint32_t record_count) {
  if (frames_added_ >= header_.frame_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard has ", header_.frame_count, " frames; cannot add another"));
  }
  RETURN_IF_ERROR(CheckFrameLayout(stored, raw_size, record_count));
  if (stored.empty() || stored.size() > UINT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame ", frames_added_, ": stored size ", stored.size(), " out of range"));
  }
  if (offset_ == 0) {  // the header goes out with the first frame (the constructor can't fail)
    RETURN_IF_ERROR(file_->Append(header_bytes_));
    FileHash(file_hash_)->Update(header_bytes_);
    offset_ = kShardHeaderSize;
  }
  FrameInfo f;
  f.offset = offset_;
  f.stored_size = static_cast<uint32_t>(stored.size());
  f.raw_size = raw_size;
  f.first_record = records_added_;
  f.record_count = record_count;
  f.checksum = Xxh3(stored);
  RETURN_IF_ERROR(file_->Append(stored));
  FileHash(file_hash_)->Update(stored);
  storage_internal::AppendIndexEntry(f, &index_bytes_);
  offset_ += stored.size();
  ++frames_added_;
  records_added_ += record_count;
  return absl::OkStatus();
}

absl::Status ShardWriter::CheckFrameLayout(absl::string_view stored, uint32_t raw_size,
                                           uint32_t record_count) const {
  if (!header_.spec.encoded()) {
    const uint32_t expected_records = storage_internal::FrameRecordCount(
        header_.record_count, header_.records_per_frame, frames_added_);
    const uint64_t expected_raw = FrameView::ExpectedBytes(header_.spec, expected_records);
    if (record_count != expected_records || raw_size != expected_raw) {
      return absl::InvalidArgumentError(
          absl::StrCat("frame ", frames_added_, ": expected ", expected_records, " records (",
                       expected_raw, " raw bytes), got ", record_count, " (", raw_size, ")"));
    }
    return absl::OkStatus();
  }
  // Variable-size records: 1..M per frame, within the shard's count; the offset table and
  // labels fit in raw_size (docs/formats/shard.md, "Version 2").
  const uint64_t left = header_.record_count - records_added_;
  const uint64_t overhead = FrameView::VariableOverheadBytes(header_.spec, record_count);
  if (record_count == 0 || record_count > header_.records_per_frame || record_count > left ||
      raw_size < overhead + record_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "frame ", frames_added_, ": ", record_count, " records in ", raw_size,
        " raw bytes; expected 1..", std::min<uint64_t>(header_.records_per_frame, left),
        " records of at least ", FrameView::VariableOverheadBytes(header_.spec, 1) + 1, " bytes"));
  }
  if (header_.codec == FrameCodec::kNone && stored.size() != raw_size) {
    return absl::InvalidArgumentError(absl::StrCat("frame ", frames_added_, ": codec none stores ",
                                                   raw_size, " raw bytes as they are, got ",
                                                   stored.size()));
  }
  return absl::OkStatus();
}

absl::Status ShardWriter::Finish() {
  if (frames_added_ != header_.frame_count || frames_added_ == 0 ||
      records_added_ != header_.record_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard needs ", header_.frame_count, " frames of ", header_.record_count,
                     " records, got ", frames_added_, " of ", records_added_));
  }
  std::string tail = index_bytes_;
  std::string footer = storage_internal::EncodeFooterPrefix(offset_, frames_added_);
  Xxh3Stream meta;
  meta.Update(header_bytes_);
  meta.Update(index_bytes_);
  meta.Update(footer);
  meta_checksum_ = meta.Digest();
  PutFixed64(&footer, meta_checksum_);
  footer.append(kFooterMagic, 8);
  tail += footer;
  RETURN_IF_ERROR(file_->Append(tail));
  FileHash(file_hash_)->Update(tail);
  offset_ += tail.size();
  return absl::OkStatus();
}

uint64_t ShardWriter::file_checksum() const { return FileHash(file_hash_)->Digest(); }

}  // namespace sluice
