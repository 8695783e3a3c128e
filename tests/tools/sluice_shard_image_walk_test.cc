// sluice-shard create on image folders and lists that are not plain trees of files: a folder
// with two links to ".", one file listed in three spellings with --holdout-fraction, a FIFO
// with an image name, and names holding a terminal escape. Each run is under `timeout`, so a
// walk that never ends fails the test instead of hanging it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "nlohmann/json.hpp"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunShell;
using testing::ToolOutput;

// The smallest JPEG the structure check accepts: SOI, a 1x1 frame header, a scan, EOI.
constexpr char kTinyJpeg[] =
    "\xff\xd8\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x01\x01\x11\x00"
    "\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00\x00\xff\xd9";

class SluiceShardImageWalkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "sluice_shard_image_walk_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Write(const std::string& relative,
             const std::string& bytes = std::string(kTinyJpeg, sizeof(kTinyJpeg) - 1)) {
    const fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), p.string(), bytes).ok()) << p;
  }
  std::string Path(const std::string& relative) { return JoinPath(dir_, relative); }

  // sluice-shard with `args`, ended after 60 s (exit 124) if it has not ended by itself.
  ToolOutput Shard(const std::string& args) {
    return RunShell(absl::StrCat("timeout 60 ", SLUICE_SHARD_BIN, " ", args));
  }

  std::string dir_;
};

TEST_F(SluiceShardImageWalkTest, TwoLinksToTheSameFolderEndAtOnceNamingTheLoop) {
  // This ran until killed, its memory growing by about 8 MB/s.
  Write("img/cls/a/ok.jpg");
  fs::create_symlink(".", Path("img/cls/a/x"));
  fs::create_symlink(".", Path("img/cls/a/y"));
  const ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_LT(r.seconds, 30) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("img/cls/a/x"),
                                             " (a symbolic link to \".\") leads back to ",
                                             Path("img/cls/a"), ", a folder that contains it")));
  EXPECT_FALSE(fs::exists(Path("ds/train.manifest.json")));
}

TEST_F(SluiceShardImageWalkTest, LinkToTheParentFolderIsRefusedNotListedFortyOneTimes) {
  Write("img/cls/a/ok.jpg");
  fs::create_symlink("..", Path("img/cls/a/root"));
  const ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("img/cls/a/root"),
                                             " (a symbolic link to \"..\") leads back to ",
                                             Path("img/cls"))));
  EXPECT_THAT(r.text, Not(HasSubstr("no image extension")));
}

TEST_F(SluiceShardImageWalkTest, OneFileListedThreeWaysWithAHoldoutIsRefusedAndNoSplitWritten) {
  // 21 of 30 such files landed in both the train and the test split.
  std::string list;
  for (int i = 0; i < 10; ++i) {
    Write(absl::StrCat("leak/f", i, ".jpg"));
    absl::StrAppend(&list, "leak/f", i, ".jpg,0\n./leak/f", i, ".jpg,0\nleak//f", i, ".jpg,0\n");
  }
  Write("list.txt", list);
  const ToolOutput r = Shard(absl::StrCat("create --quiet --image-list ", Path("list.txt"),
                                          " --holdout-fraction 0.3 --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text,
              HasSubstr(absl::StrCat(Path("list.txt"), ":1: leak/f0.jpg and ", Path("list.txt"),
                                     ":2: ./leak/f0.jpg are the same file")));
  EXPECT_THAT(r.text, HasSubstr("remove one of them (20 entries in all repeat an earlier one)"));
  EXPECT_FALSE(fs::exists(Path("ds/train.manifest.json")));
  EXPECT_FALSE(fs::exists(Path("ds/test.manifest.json")));
}

TEST_F(SluiceShardImageWalkTest, FifoIsNamedOnceOrSkippedAndCountedNeverOpened) {
  Write("img/cls/ok.jpg");
  ASSERT_EQ(::mkfifo(Path("img/cls/pipe.jpg").c_str(), 0644), 0);
  ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  // It read "<path>: <path>: is not a regular file", and --skip-bad-images did not skip it.
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("img/cls/pipe.jpg"),
                                             ": is not a regular file (a FIFO), expected a JPEG "
                                             "or PNG file (1 file refused; --skip-bad-images")));
  EXPECT_THAT(r.text, Not(HasSubstr("pipe.jpg: /")));
  r = Shard(absl::StrCat("create --quiet --skip-bad-images --image-folder ", Path("img"), " --out ",
                         Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat("skipped 1 bad image files (--skip-bad-images):\n  ",
                                             Path("img/cls/pipe.jpg"),
                                             ": is not a regular file (a FIFO)")));
}

TEST_F(SluiceShardImageWalkTest, TerminalEscapesInFileAndClassNamesArePrintedAsText) {
  const std::string red = "\x1b[31mred";
  Write("img/" + red + "/ok.jpg");
  Write("img/" + red + "/" + red + ".txt", "x");
  ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("  \\x1b[31mred/\\x1b[31mred.txt: no image extension"));
  EXPECT_THAT(r.text, Not(HasSubstr("\x1b")));
  r = Shard(absl::StrCat("inspect ", Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("classes (label: name (records)): 0: \\x1b[31mred (1)"));
  EXPECT_THAT(r.text, Not(HasSubstr("\x1b")));
  Write("img/" + red + "/" + red + ".jpg", "not an image");
  r = Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("/img/\\x1b[31mred/\\x1b[31mred.jpg: not a JPEG or PNG image"));
  EXPECT_THAT(r.text, Not(HasSubstr("\x1b")));
}

// A folder literally named "caf\xe9" and a Latin-1 "caf<E9>": the second is recorded escaped,
// the first as it is, and both became class "caf\xe9" with the same record sources.
TEST_F(SluiceShardImageWalkTest, TwoClassFoldersRecordedUnderOneNameAreRefusedNamingBoth) {
  Write("img/caf\\xe9/1.jpg");
  Write("img/caf\xe9/1.jpg");
  const ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("would both be recorded as class"));
  EXPECT_FALSE(fs::exists(Path("ds/train.manifest.json")));
}

TEST_F(SluiceShardImageWalkTest, InspectAndVerifyPrintEscapesInPathsAsText) {
  // The success lines and verify's warnings printed these raw: the terminal was cleared.
  Write("img/cls/ok.jpg");
  const std::string out = Path("o/esc\x1b[2Jdir");
  ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out '", out, "'"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  Write("o/esc\x1b[2Jdir/train-\x1b[31mevil.shard", "x");
  Write("o/esc\x1b[2Jdir/\x1b[32mleft.tmp", "x");
  Write("o/esc\x1b[2Jdir/\x1b[33mstray", "x");
  for (const char* command : {"inspect", "verify"}) {
    r = Shard(absl::StrCat(command, " '", out, "'"));
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.text;
    EXPECT_THAT(r.text, HasSubstr("esc\\x1b[2Jdir")) << command;
    EXPECT_THAT(r.text, Not(HasSubstr("\x1b"))) << command << "\n" << r.text;
  }
  EXPECT_THAT(r.text, HasSubstr("train-\\x1b[31mevil.shard: looks like a shard"));
  EXPECT_THAT(r.text, HasSubstr("\\x1b[32mleft.tmp: leftover"));
  EXPECT_THAT(r.text, HasSubstr("\\x1b[33mstray: unexpected file"));
}

TEST_F(SluiceShardImageWalkTest, SplitNamesWithControlCharactersAreRefusedAsSlashesAre) {
  Write("img/cls/ok.jpg");
  for (const char* split : {"x\x1b[31my", "bad\xff", "a/b"}) {
    const ToolOutput r = Shard(absl::StrCat("create --quiet --image-folder ", Path("img"),
                                            " --out ", Path("ds"), " '--split=", split, "'"));
    EXPECT_NE(r.exit_code, 0) << r.text;
    EXPECT_THAT(r.text, HasSubstr("--split: split name \"")) << r.text;
    EXPECT_THAT(r.text, HasSubstr("expected a plain name such as train")) << r.text;
    EXPECT_THAT(r.text, Not(HasSubstr("\x1b"))) << r.text;
    EXPECT_FALSE(fs::exists(Path("ds"))) << split;
  }
  const ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds"),
                         " --holdout-fraction 0.5 '--holdout-split=t\x1b[1m'"));
  EXPECT_NE(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--holdout-split: split name \"t\\x1b[1m\"")) << r.text;
}

TEST_F(SluiceShardImageWalkTest, SplitNamesNoReaderAcceptsAreRefusedBeforeAnythingIsCreated) {
  // --split .. wrote "...manifest.json" with exit 0 and verify then refused it; a 300-byte
  // --split failed with "unlink failed: File name too long" and left an empty --out folder.
  Write("img/cls/ok.jpg");
  Write("img/cls/ok2.jpg");
  const std::string too_long(300, 'a');
  for (const std::string& split : {std::string("."), std::string(".."), too_long}) {
    for (const char* flag : {"--split", "--holdout-split"}) {
      const ToolOutput r =
          Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ", Path("ds"),
                             " --holdout-fraction 0.5 '", flag, "=", split, "'"));
      EXPECT_NE(r.exit_code, 0) << flag << "=" << split << "\n" << r.text;
      EXPECT_THAT(r.text, HasSubstr(absl::StrCat(flag, ": split name \""))) << r.text;
      EXPECT_THAT(r.text, HasSubstr(split == too_long ? "300 bytes, expected at most 217"
                                                      : "expected a plain name such as train"))
          << r.text;
      EXPECT_FALSE(fs::exists(Path("ds"))) << flag << "=" << split;
    }
  }
  // The longest accepted name is written, verified and exported.
  const std::string longest(217, 'b');
  ToolOutput r = Shard(absl::StrCat("create --quiet --image-folder ", Path("img"), " --out ",
                                    Path("ds"), " --split ", longest));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  r = Shard(absl::StrCat("verify ", Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  r = Shard(absl::StrCat("export ", Path("ds"), " --split .. --out ", Path("exp/x")));
  EXPECT_NE(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("export: --split: split name \"..\": expected a plain name"))
      << r.text;
}

TEST_F(SluiceShardImageWalkTest, NumClassesAbove256StoresTheListsLabelsAsI32) {
  // --image-list picked u8 labels itself and then refused --num-classes 1000 with
  // "num_classes 1000: expected in [1, 256] for u8 labels".
  Write("img/a.jpg");
  Write("img/b.jpg");
  Write("list.txt", "img/a.jpg,3\nimg/b.jpg,7\n");
  ToolOutput r = Shard(absl::StrCat("create --quiet --image-list ", Path("list.txt"), " --out ",
                                    Path("ds"), " --num-classes 1000"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  absl::StatusOr<std::string> manifest =
      ReadFileToString(Env::Default(), Path("ds/train.manifest.json"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_THAT(
      *manifest,
      HasSubstr("\"dtype\": \"i32\",\n    \"num_classes\": 1000,\n    \"class_counts\": ["));
  std::vector<uint64_t> counts(1000, 0);
  counts[3] = counts[7] = 1;
  EXPECT_EQ(nlohmann::json::parse(*manifest)["label"]["class_counts"].get<std::vector<uint64_t>>(),
            counts);
  r = Shard(absl::StrCat("verify ", Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
}

TEST_F(SluiceShardImageWalkTest, DanglingLinkIsABadImageAndAllSkippedIsSaid) {
  // It failed the run with "stat failed: No such file or directory" even with
  // --skip-bad-images; and a run whose files were all skipped said only "zero records".
  fs::create_directories(Path("f/cat"));
  fs::create_symlink("/nonexistent", Path("f/cat/dang.jpg"));
  ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-folder ", Path("f"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("f/cat/dang.jpg"),
                                             ": is a broken symbolic link to /nonexistent")));
  r = Shard(absl::StrCat("create --quiet --skip-bad-images --image-folder ", Path("f"), " --out ",
                         Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("skipped 1 bad image files (--skip-bad-images):\n  "));
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(
                          Path("f"), ": all 1 file was skipped as bad images (see above)")));
  EXPECT_THAT(r.text, Not(HasSubstr("zero records")));
  EXPECT_FALSE(fs::exists(Path("ds/train.manifest.json")));

  // With another file, the link is skipped and counted.
  Write("f/cat/ok.jpg");
  r = Shard(absl::StrCat("create --quiet --skip-bad-images --image-folder ", Path("f"), " --out ",
                         Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("dang.jpg: is a broken symbolic link to /nonexistent"));
}

TEST_F(SluiceShardImageWalkTest, KernelFileShorterThanItsSizeIsABadImage) {
  // stat says 4096 bytes; a read gives one line. It failed the run with "short read".
  const std::string sys = "/sys/kernel/mm/transparent_hugepage/enabled";
  std::error_code ec;
  if (fs::file_size(sys, ec) != 4096 || ec) GTEST_SKIP() << sys << " is not a 4096-byte file";
  Write("ok.jpg");
  Write("list.txt", absl::StrCat("ok.jpg,0\n", sys, ",0\n"));
  ToolOutput r =
      Shard(absl::StrCat("create --quiet --image-list ", Path("list.txt"), " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(sys, ": read ")));
  EXPECT_THAT(r.text, HasSubstr(" bytes of the 4096 its size says"));
  r = Shard(absl::StrCat("create --quiet --skip-bad-images --image-list ", Path("list.txt"),
                         " --out ", Path("ds")));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("skipped 1 bad image files"));
}

}  // namespace
}  // namespace sluice
