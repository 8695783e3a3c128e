// sluice-shard create's bounds on image files (docs/limits.md): --max-image-pixels (PIL's
// Image.MAX_IMAGE_PIXELS by default), a file over 2^28 bytes refused from its size, the
// largest label and the holdout fraction named as written; and the image that sets a split's
// area bound recorded in its manifest (sample.max_pixels_record).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "storage/dataset.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Result = testing::ToolOutput;
using testing::RunShell;

Result RunShard(const std::string& args) {
  return RunShell(absl::StrCat(SLUICE_SHARD_BIN, " ", args));
}

uint32_t Crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : bytes) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

void PutBe32(std::string* s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s->push_back(static_cast<char>(v >> shift));
}

void AppendChunk(std::string* png, const std::string& type, const std::string& data) {
  PutBe32(png, static_cast<uint32_t>(data.size()));
  png->append(type + data);
  PutBe32(png, Crc32(type + data));
}

// 69 bytes with valid CRCs that pass the structure check, declaring width x height.
std::string TinyPng(uint32_t width, uint32_t height) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  PutBe32(&ihdr, width);
  PutBe32(&ihdr, height);
  ihdr.append("\x08\x02\x00\x00\x00", 5);
  AppendChunk(&png, "IHDR", ihdr);
  AppendChunk(&png, "IDAT", std::string("\x78\x9c\x63\x60\x00\x00\x00\x02\x00\x01\x00\x00", 12));
  AppendChunk(&png, "IEND", "");
  return png;
}

class SluiceShardImageBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "sluice_shard_image_bounds_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RunShell(absl::StrCat("rm -rf ", dir_, " && mkdir -p ", dir_));
  }
  void TearDown() override { RunShell(absl::StrCat("rm -rf ", dir_)); }

  void Write(const std::string& name, const std::string& bytes) {
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), absl::StrCat(dir_, "/", name), bytes).ok());
  }
  // "create --image-list LIST --out DIR/ds --quiet " for a list of `lines`.
  std::string Create(const std::string& lines) {
    Write("list.txt", lines);
    return absl::StrCat("create --image-list ", dir_, "/list.txt --out ", dir_, "/ds --quiet ");
  }

  std::string dir_;
};

// The case: a 69-byte PNG declaring 60000x60000 passed with exit 0 and set the split's
// bound to 60000x60000, so that the split could not be trained.
TEST_F(SluiceShardImageBoundsTest, A69BytePngDeclaring60000x60000IsRefusedNamingItAndTheFlag) {
  Write("ok.png", TinyPng(8, 8));
  Write("huge.png", TinyPng(60000, 60000));
  const std::string create = Create("ok.png,0\nhuge.png,1\n");
  Result r = RunShard(create);
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(
                          dir_,
                          "/list.txt:2: huge.png: declares 60000x60000 = 3600000000 pixels "
                          "(width x height), more than the bound of 89478485 "
                          "(--max-image-pixels; the default is PIL's Image.MAX_IMAGE_PIXELS")));
  EXPECT_FALSE(Env::Default()->FileExists(dir_ + "/ds/train.manifest.json"));

  // Skipped and counted with --skip-bad-images.
  r = RunShard(create + "--skip-bad-images");
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("skipped 1 bad image files (--skip-bad-images):\n  "));
  EXPECT_THAT(r.text, HasSubstr("huge.png: declares 60000x60000 = 3600000000 pixels"));

  // --max-image-pixels=0: no bound; the manifest then names the image that sets it.
  r = RunShard(create + "--max-image-pixels=0");
  ASSERT_EQ(r.exit_code, 0) << r.text;
  auto ds = Dataset::Open(Env::Default(), dir_ + "/ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_TRUE((*ds)->manifest().image_bound.has_value());
  EXPECT_EQ((*ds)->manifest().image_bound->max_pixels, 3600000000u);
  EXPECT_EQ((*ds)->manifest().max_pixels_record, 1u);
  EXPECT_EQ((*ds)->manifest().record_sources[1], "huge.png");

  // A value the flag cannot take, or the flag on fixed-size input: usage errors.
  r = RunShard(create + "--max-image-pixels=-1");
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--max-image-pixels \"-1\": expected an integer in [0, "));
  r = RunShard(
      absl::StrCat("create --images a --labels b --out ", dir_, "/ds2 --max-image-pixels=5"));
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--max-image-pixels apply to --image-folder and --image-list"));
}

// A 60000x1 and a 1x60000 image pass (60000 pixels each), and the split records their area.
TEST_F(SluiceShardImageBoundsTest, AWideAndATallImagePassAndTheManifestRecordsTheirArea) {
  Write("wide.png", TinyPng(60000, 1));
  Write("tall.png", TinyPng(1, 60000));
  Result r = RunShard(Create("wide.png,0\ntall.png,1\n"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  auto ds = Dataset::Open(Env::Default(), dir_ + "/ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().image_bound, (ImageSizeBound{60000, 60000, 60000}));
  EXPECT_EQ((*ds)->manifest().max_pixels_record, 0u);
}

// A 1 GB file starting FF D8 FF was read whole (1.05 GB resident) before being refused.
TEST_F(SluiceShardImageBoundsTest, AFileOverTwoToThe28BytesIsRefusedFromItsSizeQuickly) {
  Write("ok.png", TinyPng(8, 8));
  Write("big.jpg", "\xFF\xD8\xFF");
  ASSERT_EQ(::truncate((dir_ + "/big.jpg").c_str(), off_t{1} << 30), 0);  // sparse
  const std::string create = Create("ok.png,0\nbig.jpg,1\n");
  const bool timed = ::access("/usr/bin/time", X_OK) == 0;
  Result r = RunShell(
      absl::StrCat(timed ? "/usr/bin/time -f 'peak %M KiB' " : "", SLUICE_SHARD_BIN, " ", create));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text,
              HasSubstr("list.txt:2: big.jpg: 1073741824 bytes, more than the 268435456-byte "
                        "(256 MiB) limit of one image file; refused from its size, unread"));
  EXPECT_LT(r.seconds, 20.0);
  // Peak resident memory far below the file's size, where /usr/bin/time is there to say.
  const size_t at = r.text.find("peak ");
  if (at != std::string::npos) {
    EXPECT_LT(std::stoll(r.text.substr(at + 5)), 200 * 1024) << r.text;
  }
}

TEST_F(SluiceShardImageBoundsTest, MessagesNameTheLargestLabelAndTheFractionAsWritten) {
  Write("a.png", TinyPng(8, 8));
  Write("b.png", TinyPng(8, 8));
  Result r = RunShard(Create("a.png,0\nb.png,2147483647\n"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(dir_,
                                             "/list.txt:2: label 2147483647: the largest label "
                                             "is 2147483646")));
  EXPECT_THAT(r.text, Not(HasSubstr("num_classes 2147483648")));
  // The documented largest label itself is accepted.
  r = RunShard(Create("a.png,0\nb.png,2147483646\n"));
  EXPECT_EQ(r.exit_code, 0) << r.text;

  r = RunShard(Create("a.png,0\nb.png,1\n") + "--holdout-fraction=1.0000001");
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--holdout-fraction \"1.0000001\": expected a number in (0, 1)"));
}

TEST_F(SluiceShardImageBoundsTest, HelpListsTheFlagAndItsDefault) {
  const Result r = RunShard("--help");
  EXPECT_THAT(r.text, HasSubstr("--max-image-pixels"));
  EXPECT_THAT(r.text, HasSubstr("89478485"));
}

}  // namespace
}  // namespace sluice
