// The readers of outside arrays: .npy files, CIFAR-10 batches, declared layouts, and the label
// check every front door makes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/testing/mem_env.h"
#include "storage/array_layout.h"
#include "storage/cifar10.h"
#include "storage/dataset.h"
#include "storage/dataset_writer.h"
#include "storage/npy.h"
#include "tests/storage/test_records.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

// A .npy file of format `major`.0 with header dict `dict` and `data`, padded as numpy pads.
std::string Npy(const std::string& dict, const std::string& data, int major = 1) {
  const size_t len_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + len_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  char len[4];
  EncodeFixed32(len, static_cast<uint32_t>(header.size()));
  out.append(len, len_bytes);
  return out + header + data;
}

std::string Dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return absl::StrCat("{'descr': '", descr, "', 'fortran_order': ", fortran ? "True" : "False",
                      ", 'shape': ", shape, ", }");
}

std::string Bytes(size_t n, uint32_t seed = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7) % 251);
  return s;
}

// CHW samples, transposed here independently of TransposeChwToHwc.
std::string ToHwc(const std::string& chw, size_t n, size_t c, size_t h, size_t w) {
  std::string hwc(chw.size(), '\0');
  for (size_t i = 0; i < n; ++i)
    for (size_t ch = 0; ch < c; ++ch)
      for (size_t y = 0; y < h; ++y)
        for (size_t x = 0; x < w; ++x)
          hwc[((i * h + y) * w + x) * c + ch] = chw[((i * c + ch) * h + y) * w + x];
  return hwc;
}

TEST(NpyTest, U8ImagesAndU8LabelsOfEveryVersionRoundTrip) {
  const std::string pixels = Bytes(5 * 6 * 7);
  const std::string labels("\x00\x01\x02\x03\x04", 5);
  for (int major : {1, 2, 3}) {
    auto r = ParseNpyPair(Npy(Dict("|u1", "(5, 6, 7)"), pixels, major), "/x.npy",
                          Npy(Dict("|u1", "(5,)"), labels, major), "/y.npy", std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->count, 5u);
    EXPECT_EQ(r->spec.height, 6u);
    EXPECT_EQ(r->spec.width, 7u);
    EXPECT_EQ(r->spec.channels, 1u);
    EXPECT_EQ(r->samples, pixels);
    EXPECT_EQ(r->labels, labels);
  }
}

TEST(NpyTest, NchwF32ImagesAreStoredHwcAndI8LabelsBecomeI32) {
  const std::string chw = Bytes(4 * 3 * 2 * 5 * 4);  // 4 records of f32 3x2x5
  std::string labels(4 * 8, '\0');
  for (int i = 0; i < 4; ++i) EncodeFixed64(labels.data() + 8 * i, static_cast<uint64_t>(i + 7));
  auto r = ParseNpyPair(Npy(Dict("<f4", "(4, 3, 2, 5)"), chw), "/x.npy",
                        Npy(Dict("<i8", "(4,)"), labels), "/y.npy", ArrayLayout::kNCHW);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.sample_dtype, SampleDType::kF32);
  EXPECT_EQ(r->spec.channels, 3u);
  EXPECT_EQ(r->spec.height, 2u);
  EXPECT_EQ(r->spec.width, 5u);
  // Transpose 4-byte elements: view each f32 as one "pixel" of a 4x-wide u8 image is wrong, so
  // compare element by element.
  for (size_t i = 0; i < 4; ++i)
    for (size_t c = 0; c < 3; ++c)
      for (size_t p = 0; p < 10; ++p)
        EXPECT_EQ(r->samples.substr(((i * 10 + p) * 3 + c) * 4, 4),
                  chw.substr(((i * 3 + c) * 10 + p) * 4, 4));
  EXPECT_EQ(r->spec.label_dtype, LabelDType::kI32);
  EXPECT_EQ(DecodeFixed32(r->labels.data() + 12), 10u);
}

TEST(NpyTest, FeatureVectorsAreOneRowOfOneChannel) {
  auto r = ParseNpyPair(Npy(Dict("<f4", "(3, 20)"), Bytes(3 * 20 * 4)), "/x.npy",
                        Npy(Dict("<i4", "(3,)"), std::string(12, '\0')), "/y.npy", std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.height, 1u);
  EXPECT_EQ(r->spec.width, 20u);
  EXPECT_EQ(r->spec.channels, 1u);
}

absl::Status ParseImages(const std::string& file, std::optional<ArrayLayout> layout = {}) {
  return ParseNpyPair(file, "/x.npy", Npy(Dict("|u1", "(2,)"), "\x01\x02"), "/y.npy", layout)
      .status();
}

TEST(NpyErrorTest, FortranOrderNamesTheFileAndTheField) {
  absl::Status s = ParseImages(Npy(Dict("|u1", "(2, 3, 3)", true), Bytes(18)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("/x.npy: .npy header field 'fortran_order' is True; "
                                     "expected False (C order)"));
}

TEST(NpyErrorTest, BigEndianNamesTheDescr) {
  absl::Status s = ParseImages(Npy(Dict(">f4", "(2, 3, 3)"), Bytes(72)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("/x.npy: .npy header field 'descr' is '>f4', a big-endian "
                                     "dtype; expected little-endian ('<f4')"));
}

TEST(NpyErrorTest, ObjectArrayNamesTheDescr) {
  absl::Status s = ParseImages(Npy(Dict("|O", "(2, 3, 3)"), Bytes(144)));
  EXPECT_THAT(s.message(), HasSubstr("'descr' is '|O', an object array"));
}

TEST(NpyErrorTest, OtherDtypesAreRefusedNamingTheSubset) {
  EXPECT_THAT(ParseImages(Npy(Dict("<f8", "(2, 3, 3)"), Bytes(144))).message(),
              HasSubstr("'descr' is '<f8'; expected one of '|u1', '<f4' (images)"));
  EXPECT_THAT(ParseImages(Npy(Dict("<i4", "(2, 3, 3)"), Bytes(72))).message(),
              HasSubstr("images must be '|u1' or '<f4'"));
}

TEST(NpyErrorTest, AmbiguousFourDimensionsNeedALayout) {
  absl::Status s = ParseImages(Npy(Dict("|u1", "(2, 3, 32, 32)"), Bytes(2 * 3 * 32 * 32)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("/x.npy: shape [2, 3, 32, 32] is ambiguous: as NHWC 2 "
                                     "samples of 3x32 with 32 channels, as NCHW 2 samples of "
                                     "32x32 with 3 channels; declare which with --layout"));
  EXPECT_TRUE(
      ParseImages(Npy(Dict("|u1", "(2, 3, 32, 32)"), Bytes(2 * 3 * 32 * 32)), ArrayLayout::kNCHW)
          .ok());
}

TEST(NpyErrorTest, DataSizeThatDisagreesWithTheShapeIsDataLoss) {
  absl::Status s = ParseImages(Npy(Dict("|u1", "(2, 3, 3)"), Bytes(17)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/x.npy: .npy data is 17 bytes; expected 18 for shape "
                                     "[2, 3, 3] of '|u1' (truncated)"));
  EXPECT_THAT(ParseImages(Npy(Dict("|u1", "(2, 3, 3)"), Bytes(19))).message(),
              HasSubstr("(trailing bytes)"));
}

TEST(NpyErrorTest, MalformedHeadersAreDataLossNamingTheFile) {
  for (const std::string& dict :
       {std::string("{'descr': '|u1', 'shape': (2, 3, 3), }"),
        std::string("{'descr': '|u1', 'fortran_order': False, 'shape': (2, x), }"),
        std::string("['descr']"),
        std::string("{'descr': '|u1', 'fortran_order': False, "
                    "'shape': (2, 3, 3), 'extra': 1, }")}) {
    absl::Status s = ParseImages(Npy(dict, Bytes(18)));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << dict;
    EXPECT_THAT(s.message(), HasSubstr("/x.npy: .npy header")) << dict;
  }
  std::string bad_version = Npy(Dict("|u1", "(2, 3, 3)"), Bytes(18));
  bad_version[6] = 4;
  EXPECT_THAT(ParseImages(bad_version).message(), HasSubstr(".npy format version 4.0"));
  EXPECT_EQ(ParseImages(bad_version.substr(0, 9)).code(), absl::StatusCode::kDataLoss);
}

TEST(NpyErrorTest, AWrongValueOrAnUnknownKeyIsNamedWithWhatWasExpected) {
  // A list shape said "descr is a list (a structured dtype)"; an extra key said "expected a
  // string, True, False or a tuple", naming neither the key nor what it should hold.
  absl::Status list = ParseImages(Npy(Dict("|u1", "[2, 3, 3]"), Bytes(18)));
  EXPECT_EQ(list.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(list.message(), HasSubstr("shape is a list; expected a tuple such as (5, 4, 4)"));
  EXPECT_THAT(list.message(), ::testing::Not(HasSubstr("descr")));
  absl::Status extra = ParseImages(
      Npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 3), 'extra': 1, }", Bytes(18)));
  EXPECT_EQ(extra.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(extra.message(), HasSubstr("unknown key \"extra\"; expected only 'descr', "
                                         "'fortran_order' and 'shape'"));
  EXPECT_THAT(
      ParseImages(Npy("{'descr': '|u1', 'fortran_order': 0, 'shape': (2, 3, 3), }", Bytes(18)))
          .message(),
      HasSubstr("fortran_order: expected True or False"));
  EXPECT_THAT(ParseImages(Npy(Dict("|u1", "[2, 3, 3]").replace(10, 5, "[('a', '|u1')]"), Bytes(18)))
                  .message(),
              HasSubstr("descr is a list (a structured dtype)"));
}

TEST(NpyErrorTest, CountsThatDisagreeNameBothFiles) {
  absl::Status s = ParseNpyPair(Npy(Dict("|u1", "(3, 2, 2)"), Bytes(12)), "/x.npy",
                                Npy(Dict("|u1", "(2,)"), "\x01\x02"), "/y.npy", std::nullopt)
                       .status();
  EXPECT_THAT(s.message(), HasSubstr("/y.npy: 2 labels, expected 3 to match the images of /x.npy"));
}

TEST(ArrayLayoutTest, WithoutLayoutOnlyChannelsLastShapesAreAccepted) {
  EXPECT_TRUE(SamplesOfArray({5, 32, 32, 3}, std::nullopt, "a", "--layout").ok());
  for (const std::vector<uint64_t>& dims : std::vector<std::vector<uint64_t>>{
           {5, 3, 32, 32}, {5, 4, 4, 3}, {5, 32, 32, 16}, {5, 1, 28, 28}}) {
    EXPECT_EQ(SamplesOfArray(dims, std::nullopt, "a", "--layout").status().code(),
              absl::StatusCode::kInvalidArgument)
        << ShapeString(dims);
  }
  EXPECT_THAT(SamplesOfArray({5}, std::nullopt, "a", "--layout").status().message(),
              HasSubstr("a: shape [5] has 1 dimensions; expected 2"));
}

std::string CifarFile(const std::string& labels, const std::string& chw) {
  std::string out;
  for (size_t i = 0; i < labels.size(); ++i) {
    out += labels[i];
    out += chw.substr(i * kCifar10PixelBytes, kCifar10PixelBytes);
  }
  return out;
}

TEST(Cifar10Test, BatchesComeBackHwcInFileOrder) {
  const std::string chw1 = Bytes(3 * kCifar10PixelBytes, 1),
                    chw2 = Bytes(2 * kCifar10PixelBytes, 2);
  const std::string a = CifarFile(std::string("\x01\x09\x00", 3), chw1),
                    b = CifarFile("\x05\x03", chw2);
  auto r = ParseCifar10({{"/data_batch_1.bin", a}, {"/data_batch_2.bin", b}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->count, 5u);
  EXPECT_EQ(r->spec.channels, 3u);
  EXPECT_EQ(r->spec.height, 32u);
  EXPECT_EQ(r->labels, std::string("\x01\x09\x00\x05\x03", 5));
  EXPECT_EQ(r->samples, ToHwc(chw1 + chw2, 5, 3, 32, 32));
}

TEST(Cifar10Test, SizeNotAMultipleOfTheRecordNamesFileAndSize) {
  const std::string a = CifarFile("\x01", Bytes(kCifar10PixelBytes));
  absl::Status s = ParseCifar10({{"/ok.bin", a}, {"/cut.bin", a.substr(0, 3000)}}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/cut.bin: 3000 bytes, not a positive multiple of 3073"));
}

TEST(CheckLabelsTest, NegativeLabelIsRefusedNamingTheFirstRecord) {
  RecordArrays r = testing::MakeRecords(testing::U8Spec(2, 2), 10);
  r.spec.label_dtype = LabelDType::kI32;
  r.labels.assign(40, '\0');
  EncodeFixed32(r.labels.data() + 4 * 6, static_cast<uint32_t>(-3));
  EncodeFixed32(r.labels.data() + 4 * 8, static_cast<uint32_t>(-4));
  absl::Status s = CheckLabels(r, std::nullopt).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("label of record 6 is -3: expected a class index >= 0"));
}

TEST(CheckLabelsTest, LabelAtNumClassesIsRefusedAndTheDefaultIsMaxPlusOne) {
  RecordArrays r = testing::MakeRecords(testing::U8Spec(2, 2), 10);
  for (int i = 0; i < 10; ++i) r.labels[i] = static_cast<char>(i % 4);
  EXPECT_EQ(CheckLabels(r, std::nullopt).value(), 4u);
  EXPECT_EQ(CheckLabels(r, 7).value(), 7u);
  EXPECT_THAT(
      CheckLabels(r, 3).status().message(),
      HasSubstr("label of record 3 is 3: expected a class index in [0, 3) (num_classes 3)"));
  EXPECT_THAT(CheckLabels(r, 257).status().message(),
              HasSubstr("num_classes 257: expected in [1, 256] for u8 labels"));
}

TEST(ManifestNumClassesTest, RoundTripsAndIsOptionalAndBounded) {
  Manifest m;
  m.split = "train";
  m.record_count = 1;
  m.spec = testing::U8Spec(2, 2);
  m.shards.push_back({"train-00000.shard", 0, 1, 1, 10, 1, std::nullopt});
  const std::string without = m.ToJson();
  EXPECT_THAT(without, ::testing::Not(HasSubstr("num_classes")));
  EXPECT_FALSE(Manifest::FromJson(without, "/m").value().num_classes);
  m.num_classes = 10;
  const std::string with = m.ToJson();
  EXPECT_THAT(with, HasSubstr("\"dtype\": \"u8\",\n    \"num_classes\": 10\n"));
  EXPECT_EQ(Manifest::FromJson(with, "/m").value().num_classes, 10u);
  m.num_classes = 300;  // more than u8 labels can hold
  absl::Status s = Manifest::FromJson(m.ToJson(), "/m").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/m: label.num_classes: 300, expected in [1, 256]"));
}

// label.class_counts: written by every writer with the records of each class, read back;
// a count list that is not num_classes long or does not add up to record_count is refused.
TEST(ManifestClassCountsTest, WritersRecordEachClassesRecordsAndReadersCheckThem) {
  RecordArrays r = testing::MakeRecords(testing::U8Spec(2, 2), 7);
  const char labels[] = {2, 0, 2, 2, 1, 0, 2};
  r.labels.assign(labels, labels + 7);
  auto env = NewMemEnv();
  WriteDatasetOptions o;
  o.num_classes = 4;  // class 3 has no records: counted 0
  auto written = WriteDataset(env.get(), "/d", "train", r, o);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->class_counts, (std::vector<uint64_t>{2, 1, 4, 0}));
  auto read = Dataset::Open(env.get(), "/d");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)->manifest().class_counts, (std::vector<uint64_t>{2, 1, 4, 0}));

  Manifest m = *written;
  EXPECT_THAT(m.ToJson(), HasSubstr("\"num_classes\": 4,\n    \"class_counts\": [\n      2,"));
  m.class_counts = {2, 1, 4};
  absl::Status s = Manifest::FromJson(m.ToJson(), "/m").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(),
              HasSubstr("/m: label.class_counts: expected an array of num_classes (4)"));
  m.class_counts = {2, 1, 4, 1};
  s = Manifest::FromJson(m.ToJson(), "/m").status();
  EXPECT_THAT(s.message(), HasSubstr("the counts add up to more than record_count 7"));
  m.class_counts = {2, 1, 3, 0};
  s = Manifest::FromJson(m.ToJson(), "/m").status();
  EXPECT_THAT(s.message(), HasSubstr("the counts add up to 6, expected record_count 7"));
  // Without num_classes nothing is counted, and a manifest without the key reads as before.
  o.num_classes.reset();
  written = WriteDataset(env.get(), "/e", "train", r, o);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->class_counts.empty());
  EXPECT_THAT(written->ToJson(), ::testing::Not(HasSubstr("class_counts")));
}

// A manifest of nothing but "[" cost 0.79 GB (10 MB) to refuse, or ended in std::bad_alloc.
TEST(ManifestTest, AManifestNestedDeeperThanAnySluiceWritesIsRefusedBeforeParsing) {
  const absl::Status s = Manifest::FromJson(std::string(10'000'000, '['), "/m").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("/m: JSON nested deeper than 64 levels"));
}

}  // namespace
}  // namespace sluice
