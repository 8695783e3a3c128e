// ShardWriter / ShardReader against docs/formats/shard.md: layout, random access, and detection
// of every single-byte flip and every truncation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/testing/mem_env.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "storage/shard_reader.h"
#include "storage/shard_writer.h"
#include "tests/storage/test_records.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::MakeRecords;
using testing::Options;
using testing::U8Spec;

constexpr char kDir[] = "/ds";

// The path of the one shard WriteOneShard wrote, as the manifest names it.
std::string ShardPath(Env* env) {
  auto ds = Dataset::Open(env, kDir);
  EXPECT_TRUE(ds.ok()) << ds.status();
  return ds.ok() ? JoinPath(kDir, (*ds)->manifest().shards[0].file) : "";
}

// Writes `r` as one shard of M records per frame and returns its bytes.
std::string WriteOneShard(Env* env, const RecordArrays& r, uint32_t m) {
  auto manifest = WriteDataset(env, kDir, "train", r, Options(1 << 20, m));
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  auto bytes = ReadFileToString(env, ShardPath(env));
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.value_or("");
}

void PutFile(Env* env, const std::string& path, absl::string_view bytes) {
  auto f = env->NewWritableFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(bytes).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

// Open, then Verify; the first failure or OK.
absl::Status OpenAndVerify(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(auto reader, ShardReader::Open(env, path));
  return reader->Verify();
}

// Recomputes meta_checksum after a test edits the header, index or footer on purpose, so the
// check under test is reached.
void RewriteMetaChecksum(std::string* file) {
  const size_t size = file->size();
  const uint64_t index_offset = DecodeFixed64(file->data() + size - kFooterSize);
  Xxh3Stream h;
  h.Update(absl::string_view(*file).substr(0, kShardHeaderSize));
  h.Update(absl::string_view(*file).substr(index_offset, size - kFooterSize - index_offset));
  h.Update(absl::string_view(*file).substr(size - kFooterSize, kFooterChecksummedPrefix));
  EncodeFixed64(file->data() + size - kFooterSize + 16, h.Digest());
}

// The doc's worked example: three 2x2x1 u8 records, labels 7, 8, 9, M = 2.
RecordArrays WorkedExample() {
  RecordArrays r;
  r.spec = U8Spec(2, 2);
  r.count = 3;
  r.samples = std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12);
  r.labels = "\x07\x08\x09";
  return r;
}

TEST(ShardTest, WorkedExampleMatchesTheFormatDoc) {
  auto env = NewMemEnv();
  const std::string file = WriteOneShard(env.get(), WorkedExample(), 2);
  const std::string header(
      "SLUICESH\x01\0\0\0\x40\0\0\0\x01\x01\0\0\x02\0\0\0\x02\0\0\0\x01\0\0\0"
      "\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x02\0\0\0\x02\0\0\0\0\0\0\0\0\0\0\0",
      64);
  EXPECT_EQ(file.substr(0, 64), header);
  auto reader = ShardReader::Open(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  const auto& frames = (*reader)->frames();
  ASSERT_EQ(frames.size(), 2u);
  const uint64_t s0 = frames[0].stored_size, s1 = frames[1].stored_size;
  EXPECT_EQ(frames[0].offset, 64u);
  EXPECT_EQ(frames[1].offset, 64 + s0);
  EXPECT_EQ(frames[0].raw_size, 10u);
  EXPECT_EQ(frames[1].raw_size, 5u);
  EXPECT_EQ(frames[1].first_record, 2u);
  EXPECT_EQ(frames[1].record_count, 1u);
  EXPECT_EQ(frames[0].checksum, Xxh3(file.substr(64, s0)));
  EXPECT_EQ(file.size(), 64 + s0 + s1 + 80 + 32);
  EXPECT_EQ(file.substr(file.size() - 8), "SLUICEFT");
  EXPECT_EQ(DecodeFixed64(file.data() + file.size() - 32), 64 + s0 + s1);
  std::string raw;
  ASSERT_TRUE((*reader)->ReadFrame(0, &raw).ok());
  EXPECT_EQ(raw, std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x07\x08", 10));
  ASSERT_TRUE((*reader)->ReadFrame(1, &raw).ok());
  EXPECT_EQ(raw, std::string("\x09\x0a\x0b\x0c\x09", 5));
}

TEST(ShardTest, ShortLastFrameReadsBackInAnyOrder) {
  auto env = NewMemEnv();
  const RecordArrays r = MakeRecords(U8Spec(3, 2), 10);
  WriteOneShard(env.get(), r, 3);  // frames of 3, 3, 3, 1 records
  auto reader = ShardReader::Open(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->frame_count(), 4u);
  EXPECT_EQ((*reader)->frames()[3].record_count, 1u);
  for (uint32_t i : {3u, 0u, 2u, 1u}) {
    std::string raw;
    ASSERT_TRUE((*reader)->ReadFrame(i, &raw).ok());
    const uint32_t n = (*reader)->frames()[i].record_count;
    EXPECT_EQ(raw.substr(0, n * 6), r.samples.substr(i * 3 * 6, n * 6)) << "frame " << i;
    EXPECT_EQ(raw.substr(n * 6), r.labels.substr(i * 3, n)) << "frame " << i;
  }
  EXPECT_TRUE((*reader)->Verify().ok());
}

TEST(ShardTest, EverySingleByteFlipIsDetected) {
  auto env = NewMemEnv();
  const std::string good = WriteOneShard(env.get(), MakeRecords(U8Spec(3, 2), 10), 3);
  ASSERT_TRUE(OpenAndVerify(env.get(), ShardPath(env.get())).ok());
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      PutFile(env.get(), "/bad.shard", bad);
      absl::Status s = OpenAndVerify(env.get(), "/bad.shard");
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss)
          << "flip of byte " << i << " with mask " << int{mask} << ": " << s;
    }
  }
}

TEST(ShardTest, EveryTruncationIsDetected) {
  auto env = NewMemEnv();
  const std::string good = WriteOneShard(env.get(), MakeRecords(U8Spec(3, 2), 10), 3);
  for (size_t len = 0; len < good.size(); ++len) {
    PutFile(env.get(), "/short.shard", good.substr(0, len));
    absl::Status s = OpenAndVerify(env.get(), "/short.shard");
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "truncated to " << len << ": " << s;
  }
}

TEST(ShardTest, AppendedBytesAreDetected) {
  auto env = NewMemEnv();
  const std::string good = WriteOneShard(env.get(), MakeRecords(U8Spec(3, 2), 10), 3);
  PutFile(env.get(), "/long.shard", good + std::string(40, '\0'));
  EXPECT_EQ(OpenAndVerify(env.get(), "/long.shard").code(), absl::StatusCode::kDataLoss);
}

TEST(ShardTest, WrongMagicIsDataLoss) {
  auto env = NewMemEnv();
  std::string file = WriteOneShard(env.get(), WorkedExample(), 2);
  file[0] = 'X';
  PutFile(env.get(), "/bad.shard", file);
  absl::Status s = ShardReader::Open(env.get(), "/bad.shard").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/bad.shard: header: magic is not SLUICESH"));
}

TEST(ShardTest, WrongVersionIsDataLossNamingTheVersion) {
  auto env = NewMemEnv();
  std::string file = WriteOneShard(env.get(), WorkedExample(), 2);
  EncodeFixed32(file.data() + 8, 7);
  RewriteMetaChecksum(&file);
  PutFile(env.get(), "/v7.shard", file);
  absl::Status s = ShardReader::Open(env.get(), "/v7.shard").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("unsupported version 7, expected 1"));
}

TEST(ShardTest, RecordCountDisagreeingWithFrameCountIsDataLoss) {
  auto env = NewMemEnv();
  std::string file = WriteOneShard(env.get(), WorkedExample(), 2);
  EncodeFixed64(file.data() + 32, 5);  // 5 records at M = 2 need 3 frames, the shard has 2
  RewriteMetaChecksum(&file);
  PutFile(env.get(), "/counts.shard", file);
  absl::Status s = ShardReader::Open(env.get(), "/counts.shard").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("frame_count 2 (footer 2), expected ceil(5/2) = 3"));
}

TEST(ShardTest, IndexRecordCountMismatchNamesTheFrame) {
  auto env = NewMemEnv();
  std::string file = WriteOneShard(env.get(), WorkedExample(), 2);
  const uint64_t index_offset = DecodeFixed64(file.data() + file.size() - 32);
  EncodeFixed32(file.data() + index_offset + 40 + 24, 2);  // frame 1 claims 2 records
  RewriteMetaChecksum(&file);
  PutFile(env.get(), "/idx.shard", file);
  absl::Status s = ShardReader::Open(env.get(), "/idx.shard").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/idx.shard: frame 1 at byte offset"));
}

TEST(ShardTest, CorruptFrameErrorNamesFileFrameAndOffset) {
  auto env = NewMemEnv();
  std::string file = WriteOneShard(env.get(), MakeRecords(U8Spec(3, 2), 10), 3);
  auto good = ShardReader::Open(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(good.ok());
  const FrameInfo f2 = (*good)->frames()[2];
  file[f2.offset + 1] ^= 0x10;
  PutFile(env.get(), "/c.shard", file);
  auto reader = ShardReader::Open(env.get(), "/c.shard");
  ASSERT_TRUE(reader.ok()) << "a frame's bytes are not read by Open: " << reader.status();
  // Frames before the corrupt one still read: random access does not depend on it.
  std::string raw;
  EXPECT_TRUE((*reader)->ReadFrame(1, &raw).ok());
  absl::Status s = (*reader)->Verify();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("/c.shard: frame 2 at byte offset ", f2.offset,
                                                  ": checksum")));
  EXPECT_EQ((*reader)->ReadFrame(2, &raw).code(), absl::StatusCode::kDataLoss);
}

TEST(ShardTest, FrameIndexOutOfRangeAndWrongBufferAreRejected) {
  auto env = NewMemEnv();
  WriteOneShard(env.get(), WorkedExample(), 2);
  auto reader = ShardReader::Open(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(reader.ok());
  std::string stored;
  EXPECT_EQ((*reader)->ReadStoredFrame(2, &stored).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE((*reader)->ReadStoredFrame(0, &stored).ok());
  std::string raw(9, '\0');  // frame 0 decompresses to 10 bytes
  EXPECT_EQ((*reader)->DecodeFrame(0, stored, absl::MakeSpan(raw.data(), raw.size())).code(),
            absl::StatusCode::kInvalidArgument);
  raw.resize(10);
  EXPECT_TRUE((*reader)->DecodeFrame(0, stored, absl::MakeSpan(raw.data(), raw.size())).ok());
  // Into a caller's buffer: exactly stored_size bytes, the same bytes as into a string.
  std::string buf(stored.size() + 1, '\0');
  EXPECT_EQ((*reader)->ReadStoredFrame(0, absl::MakeSpan(buf.data(), buf.size())).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*reader)->ReadStoredFrame(2, absl::MakeSpan(buf.data(), buf.size())).code(),
            absl::StatusCode::kOutOfRange);
  buf.resize(stored.size());
  ASSERT_TRUE((*reader)->ReadStoredFrame(0, absl::MakeSpan(buf.data(), buf.size())).ok());
  EXPECT_EQ(buf, stored);
}

TEST(ShardTest, MissingFileIsNotFound) {
  auto env = NewMemEnv();
  EXPECT_EQ(ShardReader::Open(env.get(), "/nope.shard").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ShardTest, ZeroRecordsAreRefused) {
  auto env = NewMemEnv();
  RecordArrays r;
  r.spec = U8Spec(2, 2);
  absl::Status s = WriteDataset(env.get(), kDir, "train", r, Options(10, 2)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("zero records"));
  EXPECT_FALSE(env->FileExists("/ds/train.manifest.json"));
}

TEST(ShardTest, F32SamplesAndI32LabelsRoundTrip) {
  auto env = NewMemEnv();
  RecordSpec spec = U8Spec(5, 3, 2);
  spec.sample_dtype = SampleDType::kF32;
  spec.label_dtype = LabelDType::kI32;
  const RecordArrays r = MakeRecords(spec, 7);
  WriteOneShard(env.get(), r, 4);
  auto reader = ShardReader::Open(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->spec(), spec);
  std::string raw;
  ASSERT_TRUE((*reader)->ReadFrame(1, &raw).ok());
  ASSERT_EQ(raw.size(), 3 * (5 * 3 * 2 * 4 + 4u));
  EXPECT_EQ(raw.substr(0, 3 * 120), r.samples.substr(4 * 120, 3 * 120));
  EXPECT_EQ(raw.substr(3 * 120), r.labels.substr(16, 12));
}

TEST(ShardTest, CompressFrameDoesNotDependOnWhatTheThreadCompressedBefore) {
  // Per-thread zstd contexts are reused across frames; the bytes of a frame must not depend on
  // that history, or output would change with the thread count.
  const RecordArrays a = MakeRecords(U8Spec(28, 28), 256, 7);
  const RecordArrays b = MakeRecords(U8Spec(28, 28), 100, 8);
  const std::string raw_a = a.samples + a.labels;
  std::string fresh;
  std::thread([&] { fresh = CompressFrame(raw_a, 3).value(); }).join();
  ASSERT_TRUE(CompressFrame(b.samples + b.labels, 3).ok());
  ASSERT_TRUE(CompressFrame(raw_a.substr(0, 5000), 9).ok());
  ASSERT_TRUE(CompressFrame(b.samples, 3).ok());
  EXPECT_EQ(CompressFrame(raw_a, 3).value(), fresh);
  EXPECT_EQ(CompressFrame(raw_a, 3).value(), fresh);
}

}  // namespace
}  // namespace sluice
