// Version 2 shards (variable-size encoded records) against docs/formats/shard.md, "Version 2":
// the worked example's bytes, round trips through FrameView for both codecs, how frames are
// cut, the bounds, corrupt offset tables, and byte-identical output for any thread count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/coding.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/testing/mem_env.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"
#include "storage/dataset_writer.h"
#include "storage/frame_view.h"
#include "storage/shard_reader.h"
#include "tests/storage/test_records.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDir[] = "/ds";
const std::string kJpegSignature("\xFF\xD8\xFF", 3);
const std::string kPngSignature("\x89PNG\r\n\x1A\n", 8);

// `count` fake images of sizes 1..~3000 bytes (a signature and filler; storage decodes
// nothing), alternating JPEG and PNG when `mixed`; labels i % 5.
EncodedRecords MakeEncoded(uint64_t count, bool mixed = false, LabelDType type = LabelDType::kU8) {
  EncodedRecords r;
  r.label_dtype = type;
  uint32_t x = 12345;
  for (uint64_t i = 0; i < count; ++i) {
    x = x * 1103515245u + 12345u;
    std::string s = (mixed && i % 2 == 1) ? kPngSignature : kJpegSignature;
    const size_t extra = (x >> 8) % 3000;
    for (size_t k = 0; k < extra; ++k) s.push_back(static_cast<char>((k * 7 + i) % 251));
    r.samples.push_back(std::move(s));
    if (type == LabelDType::kU8) {
      r.labels.push_back(static_cast<char>(i % 5));
    } else {
      PutFixed32(&r.labels, static_cast<uint32_t>(i % 5));
    }
  }
  return r;
}

WriteDatasetOptions EncodedOptions(uint64_t per_shard, uint32_t per_frame, uint32_t frame_bytes,
                                   FrameCodec codec = FrameCodec::kNone, int threads = 1) {
  WriteDatasetOptions o;
  o.sharding.records_per_shard = per_shard;
  o.sharding.records_per_frame = per_frame;
  o.sharding.frame_bytes = frame_bytes;
  o.sharding.codec = codec;
  o.threads = threads;
  return o;
}

std::string ShardPath(Env* env, size_t i = 0) {
  auto ds = Dataset::Open(env, kDir);
  EXPECT_TRUE(ds.ok()) << ds.status();
  return ds.ok() ? JoinPath(kDir, (*ds)->manifest().shards[i].file) : "";
}

void PutFile(Env* env, const std::string& path, absl::string_view bytes) {
  auto f = env->NewWritableFile(path);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append(bytes).ok());
  ASSERT_TRUE((*f)->Close().ok());
}

// Recomputes every frame checksum and meta_checksum after a test edits bytes on purpose, so
// the check under test is reached rather than a checksum.
void RewriteChecksums(std::string* file) {
  const size_t size = file->size();
  const uint64_t index_offset = DecodeFixed64(file->data() + size - kFooterSize);
  const uint32_t frames = DecodeFixed32(file->data() + size - kFooterSize + 8);
  for (uint32_t i = 0; i < frames; ++i) {
    char* e = file->data() + index_offset + uint64_t{kIndexEntrySize} * i;
    EncodeFixed64(e + 32,
                  Xxh3(absl::string_view(*file).substr(DecodeFixed64(e), DecodeFixed32(e + 8))));
  }
  Xxh3Stream h;
  h.Update(absl::string_view(*file).substr(0, kShardHeaderSize));
  h.Update(absl::string_view(*file).substr(index_offset, size - kFooterSize - index_offset));
  h.Update(absl::string_view(*file).substr(size - kFooterSize, kFooterChecksummedPrefix));
  EncodeFixed64(file->data() + size - kFooterSize + 16, h.Digest());
}

// Every record of the split read back through ShardReader and FrameView.
absl::StatusOr<EncodedRecords> ReadBack(Env* env) {
  ASSIGN_OR_RETURN(std::unique_ptr<Dataset> ds, Dataset::Open(env, kDir));
  EncodedRecords out;
  out.label_dtype = ds->spec().label_dtype;
  for (size_t s = 0; s < ds->manifest().shards.size(); ++s) {
    ASSIGN_OR_RETURN(const ShardReader* r, ds->shard(s));
    std::string raw;
    for (uint32_t f = 0; f < r->frame_count(); ++f) {
      RETURN_IF_ERROR(r->ReadFrame(f, &raw));
      const FrameView view(r->spec(), r->frames()[f].record_count, raw.data());
      for (uint32_t i = 0; i < view.records(); ++i) {
        out.samples.emplace_back(view.sample(i), view.sample_size(i));
        out.labels.append(view.label(i), view.label_bytes());
      }
    }
  }
  return out;
}

// The doc's worked example: JPEG records of 3, 4 and 5 bytes, labels 0, 1, 0, M = 2,
// frame_bytes = 22, codec none.
EncodedRecords WorkedExample() {
  EncodedRecords r;
  r.samples = {kJpegSignature, kJpegSignature + "\x02", kJpegSignature + "\x03\x04"};
  r.labels = std::string("\x00\x01\x00", 3);
  return r;
}

TEST(ShardV2Test, WorkedExampleMatchesTheFormatDoc) {
  auto env = NewMemEnv();
  auto m = WriteEncodedDataset(env.get(), kDir, "train", WorkedExample(),
                               EncodedOptions(1 << 20, 2, 22));
  ASSERT_TRUE(m.ok()) << m.status();
  auto file = ReadFileToString(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->size(), 203u);
  const std::string header(
      "SLUICESH\x02\0\0\0\x40\0\0\0\x01\x01\x01\x00\x05\0\0\0\0\0\0\0\0\0\0\0"
      "\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x02\0\0\0\x02\0\0\0\0\0\0\0\0\0\0\0",
      64);
  EXPECT_EQ(file->substr(0, 64), header);
  EXPECT_EQ(file->substr(64, 17),
            std::string("\x03\0\0\0\x07\0\0\0\x00\x01\xFF\xD8\xFF\xFF\xD8\xFF\x02", 17));
  EXPECT_EQ(file->substr(81, 10), std::string("\x05\0\0\0\x00\xFF\xD8\xFF\x03\x04", 10));
  EXPECT_EQ(DecodeFixed64(file->data() + 91), 64u);           // index entry 0: offset
  EXPECT_EQ(DecodeFixed64(file->data() + 91 + 40), 81u);      // index entry 1: offset
  EXPECT_EQ(DecodeFixed64(file->data() + 91 + 40 + 16), 2u);  // entry 1: first_record
  EXPECT_EQ(DecodeFixed64(file->data() + 171), 91u);          // footer: index_offset
  EXPECT_EQ(m->ToJson().find("\"version\": 2"), m->ToJson().find("\"version\""));
  // The fuzzers' seeds are this shard and its manifest (SLUICE_WRITE_SEEDS=<dir> writes them
  // there: tests/storage/fuzz/seeds/{shard,manifest}_reader_fuzzer/worked_example_v2.*).
  if (const char* seeds = std::getenv("SLUICE_WRITE_SEEDS")) {
    ASSERT_TRUE(
        WriteFileAtomically(Env::Default(), JoinPath(seeds, "worked_example_v2.shard"), *file)
            .ok());
    ASSERT_TRUE(WriteFileAtomically(Env::Default(),
                                    JoinPath(seeds, "worked_example_v2.manifest.json"), m->ToJson())
                    .ok());
  }
}

TEST(ShardV2Test, RecordsRoundTripThroughFrameViewForBothCodecs) {
  for (FrameCodec codec : {FrameCodec::kNone, FrameCodec::kZstd}) {
    for (LabelDType type : {LabelDType::kU8, LabelDType::kI32}) {
      auto env = NewMemEnv();
      const EncodedRecords in = MakeEncoded(200, /*mixed=*/true, type);
      auto m =
          WriteEncodedDataset(env.get(), kDir, "train", in, EncodedOptions(64, 16, 8000, codec));
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ(m->spec.encoding, SampleEncoding::kImage);
      EXPECT_EQ(m->shards.size(), 4u);
      auto out = ReadBack(env.get());
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->samples, in.samples);
      EXPECT_EQ(out->labels, in.labels);
      auto ds = Dataset::Open(env.get(), kDir);
      ASSERT_TRUE(ds.ok());
      EXPECT_TRUE(VerifyDataset(**ds).ok());
    }
  }
}

TEST(ShardV2Test, ReadingEncodedRecordsAsArraysIsRefusedSayingWhatTheyAre) {
  // export of a mixed split said "records are encoded image images of different sizes; ...
  // needs a decoder".
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(4, /*mixed=*/true),
                                  EncodedOptions(64, 16, 8000))
                  .ok());
  auto ds = Dataset::Open(env.get(), kDir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  absl::Status s = ReadAllRecords(**ds).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("records are JPEG and PNG files stored as given "
                                     "(sample.encoding \"image\"), whose sizes may differ"));
  EXPECT_THAT(s.message(), HasSubstr("needs each one decoded first (DecodeImage"));
  EXPECT_THAT(s.message(), Not(HasSubstr("image images")));
}

TEST(ShardV2Test, SingleEncodingIsNamedAndManifestRoundTrips) {
  auto env = NewMemEnv();
  WriteDatasetOptions o = EncodedOptions(100, 8, 1 << 20);
  o.num_classes = 5;
  o.class_names = {"a", "b", "c", "d", "e"};
  auto m = WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(30), o);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string json = m->ToJson();
  EXPECT_THAT(json, HasSubstr("\"encoding\": \"jpeg\""));
  EXPECT_THAT(json, HasSubstr("\"codec\": \"none\""));
  EXPECT_THAT(json, Not(HasSubstr("zstd_level")));
  EXPECT_THAT(json, Not(HasSubstr("height")));
  auto parsed = Manifest::FromJson(json, "/ds/train.manifest.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToJson(), json);
  EXPECT_EQ(parsed->class_names, o.class_names);
  EXPECT_EQ(parsed->spec, m->spec);
  EXPECT_EQ(parsed->options.codec, FrameCodec::kNone);
}

// A PNG's signature and IHDR chunk (CRC not filled in): enough for the header read.
std::string PngHeader(uint32_t width, uint32_t height) {
  std::string s = kPngSignature;
  const char ihdr[] = {0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  s.append(ihdr, sizeof(ihdr));
  for (uint32_t v : {width, height}) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
  }
  s.append(
      "\x08\x02\x00\x00\x00"
      "CRC!",
      9);
  return s;
}

TEST(ShardV2Test, LargestImageAndRecordSourcesRoundTripThroughTheManifest) {
  auto env = NewMemEnv();
  EncodedRecords r;
  r.samples = {PngHeader(30, 20), PngHeader(12, 41), PngHeader(1, 1)};
  r.labels = std::string(3, '\0');
  r.sources = {"cat/a.png", "dog/b c.png", "dog/\"q\".png"};
  auto m = WriteEncodedDataset(env.get(), kDir, "train", r, EncodedOptions(2, 8, 1 << 20));
  ASSERT_TRUE(m.ok()) << m.status();
  // Each maximum on its own: the box 30 x 41, and the largest image's 600 pixels.
  EXPECT_EQ(m->image_bound, (ImageSizeBound{30, 41, 600}));
  EXPECT_EQ(m->record_sources, r.sources);
  const std::string json = m->ToJson();
  EXPECT_EQ(m->max_pixels_record, 0u);  // 30 x 20: the first (and only) image of 600 pixels
  EXPECT_THAT(json, HasSubstr("\"encoding\": \"png\",\n    \"max_width\": 30,\n    "
                              "\"max_height\": 41,\n    \"max_pixels\": 600,\n    "
                              "\"max_pixels_record\": 0\n  }"));
  auto ds = Dataset::Open(env.get(), kDir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().image_bound, m->image_bound);
  EXPECT_EQ((*ds)->manifest().max_pixels_record, 0u);
  EXPECT_EQ((*ds)->manifest().record_sources, r.sources);
  EXPECT_EQ((*ds)->manifest().ToJson(), json);

  // One list entry short, or a bound with pixels beyond its box: kDataLoss naming the field.
  std::string short_list = json;
  const std::string entry = ",\n    \"dog/b c.png\"";
  short_list.replace(short_list.find(entry), entry.size(), "");
  auto bad = Manifest::FromJson(short_list, "/ds/train.manifest.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("record_sources: expected an array of"));
  std::string big = json;
  big.replace(big.find("600"), 3, "1231");
  bad = Manifest::FromJson(big, "/ds/train.manifest.json");
  EXPECT_THAT(bad.status().message(), HasSubstr("sample.max_pixels: 1231, expected in [1,"));
}

TEST(ShardV2Test, TheRecordOfTheLargestAreaIsTheFirstOfItsSizeAndOptionalWhenRead) {
  auto env = NewMemEnv();
  EncodedRecords r;
  // The widest (60000 x 1) and the tallest (1 x 60000) are not the largest by area (300 x 300).
  r.samples = {PngHeader(60000, 1), PngHeader(300, 300), PngHeader(1, 60000), PngHeader(300, 300)};
  r.labels = std::string(4, '\0');
  auto m = WriteEncodedDataset(env.get(), kDir, "train", r, EncodedOptions(2, 8, 1 << 20));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->image_bound, (ImageSizeBound{60000, 60000, 90000}));
  EXPECT_EQ(m->max_pixels_record, 1u);
  const std::string json = m->ToJson();

  // A manifest written before the field: read as before, naming no record.
  std::string old = json;
  const std::string field = ",\n    \"max_pixels_record\": 1";
  ASSERT_NE(old.find(field), std::string::npos) << json;
  old.replace(old.find(field), field.size(), "");
  auto read = Manifest::FromJson(old, "/ds/train.manifest.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->image_bound, m->image_bound);
  EXPECT_FALSE(read->max_pixels_record.has_value());

  // A record past the split, or the field without the bound: kDataLoss naming it.
  std::string past = json;
  past.replace(past.find(field), field.size(), ",\n    \"max_pixels_record\": 4");
  auto bad = Manifest::FromJson(past, "/ds/train.manifest.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("sample.max_pixels_record: 4, expected in [0, record_count 4)"));
  std::string alone = json;
  for (const char* key : {"max_width", "max_height", "max_pixels\""}) {
    // ",\n    \"key\": N," loses "\n    \"key\": N,": the comma before it stays.
    const size_t at = alone.find(std::string(",\n    \"") + key);
    ASSERT_NE(at, std::string::npos) << key;
    alone.erase(at + 1, alone.find('\n', at + 2) - (at + 1));
  }
  bad = Manifest::FromJson(alone, "/ds/train.manifest.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << alone;
  EXPECT_THAT(bad.status().message(), HasSubstr("sample.max_pixels_record: expected only with"));
}

TEST(ShardV2Test, NoLargestImageWhenARecordsHeaderGivesNoSize) {
  auto env = NewMemEnv();
  EncodedRecords r;
  r.samples = {PngHeader(30, 20), kJpegSignature + "\x01"};
  r.labels = std::string(2, '\0');
  auto m = WriteEncodedDataset(env.get(), kDir, "train", r, EncodedOptions(2, 8, 1 << 20));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->image_bound.has_value());
  EXPECT_TRUE(m->record_sources.empty());
  EXPECT_THAT(m->ToJson(), Not(HasSubstr("max_width")));
  EXPECT_THAT(m->ToJson(), Not(HasSubstr("record_sources")));
}

TEST(ShardV2Test, ClassNamesOfAnotherCountAreRefusedByTheManifestReader) {
  auto env = NewMemEnv();
  WriteDatasetOptions o = EncodedOptions(100, 8, 1 << 20);
  o.num_classes = 5;
  o.class_names = {"a", "b", "c", "d", "e"};
  auto m = WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(30), o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::string json = m->ToJson();
  json.replace(json.find("\"e\""), 3, "");
  json.replace(json.rfind(",", json.find("]", json.find("\"classes\""))), 1, "");
  auto parsed = Manifest::FromJson(json, "/ds/train.manifest.json");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(parsed.status().message(), HasSubstr("label.classes"));
}

TEST(ShardV2Test, FramesCloseAtMRecordsOrFrameBytesAndAnOversizedRecordIsAlone) {
  auto env = NewMemEnv();
  EncodedRecords r;
  for (size_t size : {10, 10, 10, 10, 10, 10, 300, 10, 40, 40}) {
    r.samples.push_back(kJpegSignature + std::string(size - 3, 'x'));
    r.labels.push_back(0);
  }
  auto m = WriteEncodedDataset(env.get(), kDir, "train", r, EncodedOptions(100, 4, 100));
  ASSERT_TRUE(m.ok()) << m.status();
  auto reader = ShardReader::Open(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<uint32_t> counts;
  for (const FrameInfo& f : (*reader)->frames()) counts.push_back(f.record_count);
  // Raw bytes per record: 5 + sample size. Frames: 4 records (M); 2 (15 + 15, and the
  // 300-byte record would pass 100); the 300-byte record alone; 15 + 45 (a third, 45 more,
  // would make 105); the last 45.
  EXPECT_THAT(counts, ::testing::ElementsAre(4, 2, 1, 2, 1));
  EXPECT_EQ((*reader)->header().max_sample_bytes, 300u);
  EXPECT_EQ((*reader)->FrameOfRecord(0), 0u);
  EXPECT_EQ((*reader)->FrameOfRecord(5), 1u);
  EXPECT_EQ((*reader)->FrameOfRecord(6), 2u);
  EXPECT_EQ((*reader)->FrameOfRecord(8), 3u);
  EXPECT_EQ((*reader)->FrameOfRecord(9), 4u);
}

TEST(ShardV2Test, OutputIsByteIdenticalForOneAndTwoThreads) {
  const EncodedRecords in = MakeEncoded(500, true);
  std::vector<std::string> files[2];
  std::string manifests[2];
  for (int t = 1; t <= 2; ++t) {
    for (FrameCodec codec : {FrameCodec::kNone, FrameCodec::kZstd}) {
      auto env = NewMemEnv();
      auto m = WriteEncodedDataset(env.get(), kDir, "train", in,
                                   EncodedOptions(128, 32, 20000, codec, t));
      ASSERT_TRUE(m.ok()) << m.status();
      manifests[t - 1] += m->ToJson();
      for (size_t s = 0; s < m->shards.size(); ++s) {
        auto bytes = ReadFileToString(env.get(), JoinPath(kDir, m->shards[s].file));
        ASSERT_TRUE(bytes.ok());
        files[t - 1].push_back(*bytes);
      }
    }
  }
  EXPECT_EQ(manifests[0], manifests[1]);
  EXPECT_EQ(files[0], files[1]);
}

TEST(ShardV2Test, FixedSizeRecordsStillWriteVersion1) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), kDir, "train", testing::MakeRecords(testing::U8Spec(2, 2), 10),
                        testing::Options(100, 4));
  ASSERT_TRUE(m.ok());
  auto file = ReadFileToString(env.get(), ShardPath(env.get()));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(DecodeFixed32(file->data() + 8), 1u);
  const std::string json = m->ToJson();
  EXPECT_THAT(json, HasSubstr("\"version\": 1"));
  for (const char* key : {"encoding", "codec", "frame_bytes", "classes"}) {
    EXPECT_THAT(json, Not(HasSubstr(key)));
  }
}

TEST(ShardV2Test, CorruptOffsetTableIsRefusedNamingShardFrameAndRecord) {
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(20),
                                  EncodedOptions(100, 4, 1 << 20))
                  .ok());
  const std::string path = ShardPath(env.get());
  auto good = ShardReader::Open(env.get(), path);
  ASSERT_TRUE(good.ok());
  const FrameInfo f1 = (*good)->frames()[1];
  struct Case {
    uint32_t record;
    uint32_t value;  // written as sample_end[record]
    const char* what;
  };
  const uint32_t end1 = DecodeFixed32(ReadFileToString(env.get(), path)->data() + f1.offset + 4);
  for (const Case& c :
       {Case{1, 0, "sample_end 0"}, Case{2, end1, "sample_end"}, Case{3, 1u << 30, "sample_end"}}) {
    std::string file = *ReadFileToString(env.get(), path);
    EncodeFixed32(file.data() + f1.offset + 4 * c.record, c.value);
    RewriteChecksums(&file);
    PutFile(env.get(), "/bad.shard", file);
    auto reader = ShardReader::Open(env.get(), "/bad.shard");
    ASSERT_TRUE(reader.ok()) << "frames are checked when read: " << reader.status();
    std::string raw;
    EXPECT_TRUE((*reader)->ReadFrame(0, &raw).ok());
    absl::Status s = (*reader)->ReadFrame(1, &raw);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("/bad.shard: frame 1 at byte offset ",
                                                    f1.offset, ": record ", c.record, " (record ",
                                                    4 + c.record, " of the shard): ", c.what)));
  }
}

TEST(ShardV2Test, LastSampleNotEndingAtTheFrameEndIsRefused) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(4), EncodedOptions(100, 4, 1 << 20))
          .ok());
  std::string file = *ReadFileToString(env.get(), ShardPath(env.get()));
  const uint32_t end3 = DecodeFixed32(file.data() + 64 + 12);
  EncodeFixed32(file.data() + 64 + 12, end3 - 1);
  RewriteChecksums(&file);
  PutFile(env.get(), "/bad.shard", file);
  auto reader = ShardReader::Open(env.get(), "/bad.shard");
  ASSERT_TRUE(reader.ok());
  std::string raw;
  absl::Status s = (*reader)->ReadFrame(0, &raw);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("record 3 (record 3 of the shard): samples end at"));
}

TEST(ShardV2Test, HeaderBoundsAreCheckedAtOpen) {
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(10),
                                  EncodedOptions(100, 4, 1 << 20))
                  .ok());
  const std::string good = *ReadFileToString(env.get(), ShardPath(env.get()));
  struct Case {
    size_t offset;
    uint32_t value;
    const char* what;
  };
  for (const Case& c : {Case{20, kMaxEncodedSampleBytes + 1, "max_sample_bytes 268435457"},
                        Case{20, 0, "max_sample_bytes 0"}, Case{52, 11, "frame_count 11"},
                        Case{24, 7, "reserved"}}) {
    std::string file = good;
    EncodeFixed32(file.data() + c.offset, c.value);
    RewriteChecksums(&file);
    PutFile(env.get(), "/bad.shard", file);
    absl::Status s = ShardReader::Open(env.get(), "/bad.shard").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.what;
    EXPECT_THAT(s.message(), HasSubstr(c.what));
  }
  for (const auto& [offset, byte, what] :
       {std::tuple<size_t, char, const char*>{18, 4, "unknown sample_encoding 4"},
        {19, 2, "unknown codec 2"}}) {
    std::string file = good;
    file[offset] = byte;
    RewriteChecksums(&file);
    PutFile(env.get(), "/bad.shard", file);
    absl::Status s = ShardReader::Open(env.get(), "/bad.shard").status();
    EXPECT_THAT(s.message(), HasSubstr(what));
  }
}

TEST(ShardV2Test, IndexRawSizeOutsideItsRecordsBoundsIsRefused) {
  auto env = NewMemEnv();
  ASSERT_TRUE(WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(10),
                                  EncodedOptions(100, 4, 1 << 20, FrameCodec::kZstd))
                  .ok());
  std::string file = *ReadFileToString(env.get(), ShardPath(env.get()));
  const uint64_t index_offset = DecodeFixed64(file.data() + file.size() - kFooterSize);
  EncodeFixed32(file.data() + index_offset + 12, 3);  // frame 0's raw_size: 4 records need >= 24
  RewriteChecksums(&file);
  PutFile(env.get(), "/bad.shard", file);
  absl::Status s = ShardReader::Open(env.get(), "/bad.shard").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("frame 0 at byte offset 64: raw_size 3, expected in [24, "));
}

TEST(ShardV2Test, EveryByteFlipOfASmallShardIsDetected) {
  auto env = NewMemEnv();
  ASSERT_TRUE(
      WriteEncodedDataset(env.get(), kDir, "train", WorkedExample(), EncodedOptions(1 << 20, 2, 22))
          .ok());
  const std::string good = *ReadFileToString(env.get(), ShardPath(env.get()));
  for (size_t i = 0; i < good.size(); ++i) {
    std::string file = good;
    file[i] ^= 0x01;
    PutFile(env.get(), "/flip.shard", file);
    auto reader = ShardReader::Open(env.get(), "/flip.shard");
    const absl::Status s = reader.ok() ? (*reader)->Verify() : reader.status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
}

TEST(ShardV2Test, BadSamplesAreRefusedNamingTheRecordAndItsFile) {
  struct Case {
    std::string sample;
    const char* what;
  };
  for (const Case& c :
       {Case{"", "record 1 (cats/b.jpg): zero bytes, expected a JPEG or PNG image"},
        Case{"GIF89a....",
             "record 1 (cats/b.jpg): not a JPEG or PNG image (starts with "
             "474946383961"},
        Case{std::string(kMaxEncodedSampleBytes + 1, '\xFF'),
             "record 1 (cats/b.jpg): 268435457 bytes, more than the 268435456-byte"}}) {
    auto env = NewMemEnv();
    EncodedRecords r = MakeEncoded(3);
    r.names = {"cats/a.jpg", "cats/b.jpg", "dogs/c.png"};
    r.samples[1] = c.sample;
    auto m = WriteEncodedDataset(env.get(), kDir, "train", r, EncodedOptions(100, 4, 1 << 20));
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(m.status().message(), HasSubstr(c.what));
    EXPECT_FALSE(env->FileExists(JoinPath(kDir, "train.manifest.json")));
  }
}

TEST(ShardV2Test, ASampleAsLargeAs4kPngRoundTripsAndFrameBytesOutOfRangeIsRefused) {
  auto env = NewMemEnv();
  EncodedRecords r = MakeEncoded(3);
  // A 3840 x 2160 RGBA PNG stored without compression, and more than the 4 MiB frame target:
  // alone in its frame.
  r.samples[1] = kPngSignature + std::string(3840 * 2160 * 4 + 1024, '\x07');
  auto m = WriteEncodedDataset(env.get(), kDir, "train", r, EncodedOptions(100, 4, 1 << 20));
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = ReadBack(env.get());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->samples == r.samples);
  for (uint64_t bad : {uint64_t{0}, kMaxFrameBytes + 1}) {
    WriteDatasetOptions o = EncodedOptions(100, 4, 1);
    o.sharding.frame_bytes = static_cast<uint32_t>(bad);
    auto refused = WriteEncodedDataset(env.get(), "/other", "train", MakeEncoded(3), o);
    EXPECT_THAT(refused.status().message(), HasSubstr("frame bytes")) << bad;
  }
}

TEST(ShardV2Test, ShardOfAnotherCodecThanTheManifestIsRefusedAtOpen) {
  auto env = NewMemEnv();
  auto m = WriteEncodedDataset(env.get(), kDir, "train", MakeEncoded(10),
                               EncodedOptions(100, 4, 1 << 20));
  ASSERT_TRUE(m.ok());
  Manifest edited = *m;
  edited.options.codec = FrameCodec::kZstd;
  edited.shards[0].meta_xxh3.reset();
  PutFile(env.get(), JoinPath(kDir, "train.manifest.json"), edited.ToJson());
  auto ds = Dataset::Open(env.get(), kDir);
  ASSERT_TRUE(ds.ok());
  absl::Status s = (*ds)->shard(0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("codec none disagrees"));
}

}  // namespace
}  // namespace sluice
