// Fuzzes ShardReader::Open + Verify + DecodeFrame over an in-memory file, both versions (seeds:
// the format doc's worked examples), and FrameView over every frame that reads.
//
// Checksums guard every byte, so random mutations almost never get past meta_checksum. Each
// input is therefore tried twice: as given, and with its frame and meta checksums recomputed,
// which lets the fuzzer reach the structural checks and zstd behind them.
// A crash, sanitizer report or __builtin_trap() (a broken invariant below) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/env.h"
#include "common/testing/mem_env.h"
#include "storage/frame_view.h"
#include "storage/shard_format.h"
#include "storage/shard_reader.h"

namespace sluice {
namespace {

void Check(Env* env, const std::string& bytes) {
  {
    auto f = env->NewWritableFile("/f.shard");
    if (!f.ok() || !(*f)->Append(bytes).ok()) __builtin_trap();
  }
  auto reader = ShardReader::Open(env, "/f.shard");
  if (!reader.ok()) {
    if (reader.status().code() != absl::StatusCode::kDataLoss) __builtin_trap();
    return;
  }
  const ShardReader& r = **reader;
  // Invariants promised by a successful Open.
  uint64_t end = kShardHeaderSize, records = 0;
  const bool variable = r.spec().encoded();
  for (const FrameInfo& f : r.frames()) {
    const uint64_t overhead = FrameView::VariableOverheadBytes(r.spec(), f.record_count);
    if (f.offset != end || f.record_count == 0 || f.first_record != records ||
        (!variable && f.raw_size != f.record_count * r.spec().record_bytes()) ||
        (variable &&
         (f.record_count > r.header().records_per_frame || f.raw_size < overhead + f.record_count ||
          f.raw_size > overhead + uint64_t{f.record_count} * r.header().max_sample_bytes))) {
      __builtin_trap();
    }
    end += f.stored_size;
    records += f.record_count;
    if (f.raw_size > (1u << 20)) return;  // keep memory bounded; sizes are already checked
  }
  if (records != r.record_count() ||
      end + kIndexEntrySize * uint64_t{r.frame_count()} + kFooterSize != bytes.size()) {
    __builtin_trap();
  }
  absl::Status verified = r.Verify();
  if (!verified.ok() && verified.code() != absl::StatusCode::kDataLoss) __builtin_trap();
  std::string raw;
  for (uint32_t i = 0; i < r.frame_count(); ++i) {
    absl::Status s = r.ReadFrame(i, &raw);
    if (verified.ok() && (!s.ok() || raw.size() != r.frames()[i].raw_size)) __builtin_trap();
    if (!s.ok()) continue;
    // A frame that reads is one FrameView may index unchecked: every record inside it.
    const FrameView view(r.spec(), r.frames()[i].record_count, raw.data());
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < view.records(); ++k) {
      const size_t size = view.sample_size(k);
      if (view.sample(k) < raw.data() || view.sample(k) + size > raw.data() + raw.size() ||
          view.label(k) + view.label_bytes() > raw.data() + raw.size() ||
          (variable && (size == 0 || size > r.header().max_sample_bytes))) {
        __builtin_trap();
      }
      bytes += size;
    }
    if (variable &&
        bytes + FrameView::VariableOverheadBytes(r.spec(), view.records()) != raw.size()) {
      __builtin_trap();
    }
  }
}

// Recomputes the frame checksums of entries that point inside the file, then meta_checksum.
bool RepairChecksums(std::string* b) {
  const size_t size = b->size();
  if (size < kShardHeaderSize + kFooterSize) return false;
  char* footer = b->data() + size - kFooterSize;
  const uint64_t index_offset = DecodeFixed64(footer);
  const uint64_t frames = DecodeFixed32(footer + 8);
  if (size < kShardHeaderSize + kFooterSize + kIndexEntrySize * frames ||
      index_offset != size - kFooterSize - kIndexEntrySize * frames) {
    return false;
  }
  for (uint64_t i = 0; i < frames; ++i) {
    char* e = b->data() + index_offset + kIndexEntrySize * i;
    const uint64_t off = DecodeFixed64(e);
    const uint64_t n = DecodeFixed32(e + 8);
    if (off <= size && n <= size - off) {
      EncodeFixed64(e + 32, Xxh3(absl::string_view(b->data() + off, n)));
    }
  }
  Xxh3Stream h;
  h.Update(absl::string_view(b->data(), kShardHeaderSize));
  h.Update(absl::string_view(b->data() + index_offset, size - kFooterSize - index_offset));
  h.Update(absl::string_view(footer, kFooterChecksummedPrefix));
  EncodeFixed64(footer + 16, h.Digest());
  return true;
}

}  // namespace
}  // namespace sluice

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sluice::Env* env = sluice::NewMemEnv().release();
  std::string bytes(reinterpret_cast<const char*>(data), size);
  sluice::Check(env, bytes);
  if (sluice::RepairChecksums(&bytes)) sluice::Check(env, bytes);
  return 0;
}
