// IDX reading and writing, and the round trip IDX -> shards -> IDX (byte-identical).
#include "storage/idx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "common/coding.h"
#include "common/env.h"
#include "common/testing/mem_env.h"
#include "storage/dataset.h"
#include "storage/dataset_records.h"
#include "storage/dataset_writer.h"
#include "tests/storage/test_records.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::MakeRecords;
using testing::Options;
using testing::U8Spec;

constexpr char kFashionDir[] = "/usr/share/datasets/fashion-mnist";

std::string Gzip(absl::string_view raw) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, raw.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// IDX -> records -> shards (MemEnv) -> records -> IDX; returns the two IDX files re-encoded.
std::pair<std::string, std::string> ThroughShards(const RecordArrays& r, uint64_t per_shard,
                                                  uint32_t per_frame) {
  auto env = NewMemEnv();
  auto m = WriteDataset(env.get(), "/d", "train", r, Options(per_shard, per_frame, 2));
  EXPECT_TRUE(m.ok()) << m.status();
  auto ds = Dataset::Open(env.get(), "/d");
  EXPECT_TRUE(ds.ok()) << ds.status();
  auto back = ReadAllRecords(**ds);
  EXPECT_TRUE(back.ok()) << back.status();
  return {EncodeIdxImages(*back), EncodeIdxLabels(*back)};
}

void FashionRoundTrip(const std::string& prefix) {
  const std::string images = std::string(kFashionDir) + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels = std::string(kFashionDir) + "/" + prefix + "-labels-idx1-ubyte.gz";
  Env* env = Env::Default();
  if (!env->FileExists(images) || !env->FileExists(labels)) {
    GTEST_SKIP() << images << " not found; install dataset-fashion-mnist (scripts/install-deps.sh)";
  }
  auto in = ReadIdxPair(env, images, labels);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->records.spec, U8Spec(28, 28));
  EXPECT_EQ(in->records.count, prefix == "train" ? 60000u : 10000u);
  EXPECT_EQ(in->sources[0].file, prefix + "-images-idx3-ubyte.gz");
  auto [img, lab] = ThroughShards(in->records, 16384, 256);
  EXPECT_TRUE(img == MaybeGunzip(ReadFileToString(env, images).value(), images).value())
      << "images differ after the round trip";
  EXPECT_TRUE(lab == MaybeGunzip(ReadFileToString(env, labels).value(), labels).value())
      << "labels differ after the round trip";
}

TEST(IdxRoundTripTest, FashionMnistTrainIsByteIdentical) { FashionRoundTrip("train"); }
TEST(IdxRoundTripTest, FashionMnistTestIsByteIdentical) { FashionRoundTrip("t10k"); }

TEST(IdxRoundTripTest, F32SamplesAndI32LabelsOfOtherShapesAreByteIdentical) {
  for (RecordSpec spec : {U8Spec(5, 7, 3), U8Spec(1, 9), U8Spec(16, 16, 4)}) {
    spec.sample_dtype = SampleDType::kF32;
    spec.label_dtype = LabelDType::kI32;
    const RecordArrays r = MakeRecords(spec, 101);
    const std::string images = EncodeIdxImages(r);
    const std::string labels = EncodeIdxLabels(r);
    EXPECT_EQ(images[2], '\x0d');
    EXPECT_EQ(labels[2], '\x0c');
    auto parsed = ParseIdxPair(images, "/i", labels, "/l");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->spec, spec);
    EXPECT_EQ(parsed->samples, r.samples);
    EXPECT_EQ(parsed->labels, r.labels);
    auto [img, lab] = ThroughShards(*parsed, 40, 7);
    EXPECT_TRUE(img == images) << spec.height << "x" << spec.width << "x" << spec.channels;
    EXPECT_TRUE(lab == labels);
  }
}

TEST(IdxTest, ValuesAreConvertedFromBigEndian) {
  // One 1x2 f32 image {1.0f, -2.0f} and the i32 label -3, written by hand in IDX (big-endian).
  const std::string images("\0\0\x0d\x03\0\0\0\x01\0\0\0\x01\0\0\0\x02\x3f\x80\0\0\xc0\0\0\0", 24);
  const std::string labels("\0\0\x0c\x01\0\0\0\x01\xff\xff\xff\xfd", 12);
  auto r = ParseIdxPair(images, "/i", labels, "/l");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->samples, std::string("\0\0\x80\x3f\0\0\0\xc0", 8));
  EXPECT_EQ(static_cast<int32_t>(DecodeFixed32(r->labels.data())), -3);
}

TEST(IdxTest, GzipAndRawGiveTheSameRecords) {
  const RecordArrays r = MakeRecords(U8Spec(3, 3), 20);
  const std::string images = EncodeIdxImages(r), labels = EncodeIdxLabels(r);
  auto raw = ParseIdxPair(images, "/i", labels, "/l");
  auto gz = ParseIdxPair(Gzip(images), "/i.gz", Gzip(labels), "/l.gz");
  ASSERT_TRUE(raw.ok() && gz.ok()) << gz.status();
  EXPECT_EQ(raw->samples, gz->samples);
  EXPECT_EQ(raw->labels, gz->labels);
  // Concatenated gzip members are one stream.
  const std::string half = images.substr(0, 10);
  EXPECT_EQ(MaybeGunzip(Gzip(half) + Gzip(images.substr(10)), "/cat.gz").value(), images);
}

class IdxErrorTest : public ::testing::Test {
 protected:
  const RecordArrays r_ = MakeRecords(U8Spec(4, 4), 12);
  const std::string images_ = EncodeIdxImages(r_);
  const std::string labels_ = EncodeIdxLabels(r_);
};

TEST_F(IdxErrorTest, WrongImagesMagicIsDataLossNamingTheExpectedMagic) {
  std::string bad = images_;
  bad[3] = 1;  // a labels file given as images
  absl::Status s = ParseIdxPair(bad, "/imgs", labels_, "/l").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/imgs: magic is 0x00000801, IDX images with 1 dimension "
                                     "(byte 3); expected 3 (N, H, W) or 4 (N, H, W, C)"));
  EXPECT_EQ(ParseIdxPair(images_, "/i", images_, "/labels").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(IdxErrorTest, NpyFileIsNamedAsNpy) {
  const std::string npy("\x93NUMPY\x01\x00\x00\x00", 10);
  absl::Status s = ParseIdxPair(npy, "/x.npy", labels_, "/l").status();
  EXPECT_THAT(s.message(), HasSubstr("/x.npy: this is a NumPy .npy file, not IDX images"));
}

TEST_F(IdxErrorTest, TwoDimensionalFloatImagesNameTheDimensionCount) {
  std::string bad = images_;
  bad[2] = 0x0D;
  bad[3] = 2;
  absl::Status s = ParseIdxPair(bad, "/i", labels_, "/l").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("/i: magic is 0x00000d02, IDX images with 2 dimensions "
                        "(byte 3); expected 3 (N, H, W) or 4 (N, H, W, C) dimensions"));
}

TEST_F(IdxErrorTest, UnsupportedTypeCodeIsDataLoss) {
  std::string bad = images_;
  bad[2] = 0x0E;  // f64
  EXPECT_EQ(ParseIdxPair(bad, "/i", labels_, "/l").status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(IdxErrorTest, MismatchedCountsAreInvalidArgument) {
  RecordArrays fewer = r_;
  fewer.count = 11;
  fewer.labels.pop_back();
  absl::Status s = ParseIdxPair(images_, "/imgs", EncodeIdxLabels(fewer), "/labs").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("/labs: 11 labels, expected 12 to match the images of /imgs"));
}

TEST_F(IdxErrorTest, TruncatedOrOverlongDataIsDataLoss) {
  absl::Status s =
      ParseIdxPair(images_.substr(0, images_.size() - 1), "/i", labels_, "/l").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("191 data bytes, expected 192 for dimensions 12x4x4 (truncated)"));
  EXPECT_EQ(ParseIdxPair(images_ + "x", "/i", labels_, "/l").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseIdxPair(images_.substr(0, 9), "/i", labels_, "/l").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(IdxErrorTest, HugeDimensionsDoNotOverflow) {
  std::string bad = images_;
  EncodeBigEndian32(bad.data() + 8, 0xffffffff);
  EncodeBigEndian32(bad.data() + 12, 0xffffffff);
  EXPECT_EQ(ParseIdxPair(bad, "/i", labels_, "/l").status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(IdxErrorTest, ZeroImagesAreInvalidArgument) {
  RecordArrays none;
  none.spec = U8Spec(4, 4);
  absl::Status s = ParseIdxPair(EncodeIdxImages(none), "/i", EncodeIdxLabels(none), "/l").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("0 images"));
}

TEST_F(IdxErrorTest, EveryTruncationOfTheGzIsDataLoss) {
  const std::string gz = Gzip(images_);
  for (size_t len = 2; len < gz.size(); ++len) {
    absl::Status s = MaybeGunzip(gz.substr(0, len), "/i.gz").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "length " << len;
  }
  EXPECT_THAT(MaybeGunzip(gz.substr(0, gz.size() / 2), "/i.gz").status().message(),
              HasSubstr("/i.gz: truncated .gz"));
}

TEST_F(IdxErrorTest, CorruptGzIsDataLoss) {
  std::string gz = Gzip(images_);
  gz[gz.size() - 6] ^= 0x55;  // CRC32 in the trailer
  absl::Status s = MaybeGunzip(gz, "/i.gz").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/i.gz: corrupt .gz"));
  EXPECT_EQ(MaybeGunzip(Gzip(images_) + "junk", "/j.gz").status().code(),
            absl::StatusCode::kDataLoss);
}

// A byte flipped mid-stream can make inflate produce more bytes than the IDX header promises
// before zlib notices the damage (here: the trailer's CRC); that must read as a corrupt deflate
// stream, not as "(trailing bytes)".
void ExpectCorruptDeflate(const std::string& labels_gz, const std::string& path) {
  std::string bad = labels_gz;
  bad[bad.size() / 2] ^= static_cast<char>(0xff);
  RecordArrays one;
  one.spec = U8Spec(2, 2);
  one.count = 1;
  one.samples.assign(4, '\0');
  one.labels.assign(1, '\0');
  // The labels are read (and fail) before their count is compared with the images'.
  absl::Status s = MaybeGunzip(bad, path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(path + ": corrupt .gz: corrupt deflate stream"));
  EXPECT_THAT(s.message(), HasSubstr("Z_DATA_ERROR"));
  absl::Status p = ParseIdxPair(EncodeIdxImages(one), "/i", bad, path).status();
  EXPECT_EQ(p.code(), absl::StatusCode::kDataLoss) << p;
  EXPECT_THAT(p.message(), HasSubstr(path + ": corrupt .gz: corrupt deflate stream"));
  EXPECT_THAT(p.message(), HasSubstr("Z_DATA_ERROR"));
  EXPECT_THAT(p.message(), ::testing::Not(HasSubstr("trailing bytes")));
}

TEST(IdxGzTest, CorruptDeflateStreamIsNotReportedAsTrailingBytes) {
  // 10000 labels like Fashion-MNIST's t10k, from a fixed generator.
  RecordArrays r;
  r.spec = U8Spec(1, 1);
  r.count = 10000;
  r.samples.assign(r.count, '\0');
  r.labels.resize(r.count);
  uint32_t x = 12345;
  for (char& c : r.labels) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>((x >> 16) % 10);
  }
  ExpectCorruptDeflate(Gzip(EncodeIdxLabels(r)), "/gen-labels.gz");
}

TEST(IdxGzTest, CorruptFashionMnistLabelsGzIsACorruptDeflateStream) {
  const std::string path = std::string(kFashionDir) + "/t10k-labels-idx1-ubyte.gz";
  Env* env = Env::Default();
  if (!env->FileExists(path)) GTEST_SKIP() << path << " not found";
  auto gz = ReadFileToString(env, path);
  ASSERT_TRUE(gz.ok()) << gz.status();
  // Flipping byte size/2 (2562 of 5125) makes inflate yield 10010 bytes, 2 more than the
  // header's 10000 labels, before the CRC check fails.
  ExpectCorruptDeflate(*gz, path);
  std::string bad = *gz;
  bad[bad.size() / 2] ^= static_cast<char>(0xff);
  auto in = ParseIdxPair(EncodeIdxImages([] {
                           RecordArrays r;
                           r.spec = U8Spec(1, 1);
                           r.count = 10000;
                           r.samples.assign(r.count, '\0');
                           r.labels.assign(r.count, '\0');
                           return r;
                         }()),
                         "/i", bad, path);
  ASSERT_FALSE(in.ok());
  EXPECT_THAT(in.status().message(), HasSubstr("incorrect data check"));
}

TEST(IdxFileTest, MissingFileIsNotFound) {
  auto env = NewMemEnv();
  EXPECT_EQ(ReadIdxPair(env.get(), "/nope-images", "/nope-labels").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(IdxFileTest, WriteIdxPairUsesFashionMnistNames) {
  auto env = NewMemEnv();
  const RecordArrays r = MakeRecords(U8Spec(2, 2), 3);
  auto paths = WriteIdxPair(env.get(), "/out/train", r);
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_EQ(paths->images, "/out/train-images-idx3-ubyte");
  EXPECT_EQ(paths->labels, "/out/train-labels-idx1-ubyte");
  auto in = ReadIdxPair(env.get(), paths->images, paths->labels);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->records.samples, r.samples);
}

}  // namespace
}  // namespace sluice
