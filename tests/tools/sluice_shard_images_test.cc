// sluice-shard create from JPEG/PNG files (docs/formats/shard.md, "Version 2"): an ImageFolder
// tree written by PIL read in torchvision's order, a list file, deterministic bytes for any
// thread count, and the one-line errors for empty, non-image and unlisted files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/checksum.h"
#include "common/env.h"
#include "storage/dataset.h"
#include "storage/frame_view.h"
#include "storage/shard_reader.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

using Result = testing::ToolOutput;
using testing::RunShell;

Result RunShard(const std::string& args) {
  return RunShell(absl::StrCat(SLUICE_SHARD_BIN, " ", args));
}

// Writes an ImageFolder tree with PIL under DIR: classes "zebra", "ant", "Bee" (sorted: Bee, ant,
// zebra), PNGs in grey, RGB and palette modes, JPEGs (one with an upper-case extension, one in
// a nested folder), and a .txt that torchvision's filter drops. With a second argument, prints
// torchvision's ImageFolder classes, then one "<relative path> <label>" per sample, in its
// order.
constexpr char kWriteFolder[] = R"PY(
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(7)
for cls in ["zebra", "ant", "Bee"]:
    os.makedirs(os.path.join(root, cls, "nested"), exist_ok=True)
    for i in range(3):
        a = rng.integers(0, 256, (9 + i, 13, 3), dtype=np.uint8)
        Image.fromarray(a).save(os.path.join(root, cls, "rgb%d.png" % i))
        Image.fromarray(a[:, :, 0]).save(os.path.join(root, cls, "grey%d.png" % i))
        Image.fromarray(a).convert("P").save(os.path.join(root, cls, "pal%d.png" % i))
    Image.fromarray(a).save(os.path.join(root, cls, "photo.JPG"), quality=85)
    Image.fromarray(a).save(os.path.join(root, cls, "nested", "deep.jpeg"), quality=70)
    open(os.path.join(root, cls, "README.txt"), "w").write("not an image")
if len(sys.argv) < 3:
    sys.exit(0)
from torchvision.datasets import ImageFolder  # slow to import: only when asked
ds = ImageFolder(root, loader=lambda p: p)
print(",".join(ds.classes))
for path, label in ds.samples:
    print(os.path.relpath(path, root), label)
)PY";

// Where each whitespace-separated token of `line` ends.
std::vector<size_t> TokenEnds(const std::string& line) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != ' ' && (i + 1 == line.size() || line[i + 1] == ' ')) ends.push_back(i + 1);
  }
  return ends;
}

// The lines of `text` from the first that starts with `header_start` up to the first that is
// not indented by two spaces (a table of inspect's output, header first).
std::vector<std::string> TableAfter(const std::string& text, const std::string& header_start) {
  std::vector<std::string> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (rows.empty() ? absl::StartsWith(line, header_start) : absl::StartsWith(line, "  ")) {
      rows.emplace_back(line);
    } else if (!rows.empty()) {
      break;
    }
  }
  return rows;
}

class SluiceShardImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "sluice_shard_images_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RunShell(absl::StrCat("rm -rf ", dir_, " && mkdir -p ", dir_));
    if (RunShell("/usr/bin/python3 -c 'import PIL, numpy'").exit_code != 0) {
      GTEST_SKIP() << "needs /usr/bin/python3 with PIL and numpy";
    }
  }
  void TearDown() override { RunShell(absl::StrCat("rm -rf ", dir_)); }

  // Writes the folder of kWriteFolder at `root`; with `torchvision`, also reads torchvision's
  // classes and samples of it (importing torchvision takes seconds).
  void WriteFolder(const std::string& root, bool torchvision = false) {
    const std::string script = absl::StrCat(dir_, "/write_folder.py");
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), script, kWriteFolder).ok());
    const Result r = RunShell(
        absl::StrCat("/usr/bin/python3 ", script, " ", root, torchvision ? " torchvision" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.text;
    if (!torchvision) return;
    std::vector<std::string> lines = absl::StrSplit(r.text, '\n', absl::SkipEmpty());
    ASSERT_GT(lines.size(), 1u) << r.text;
    classes_ = absl::StrSplit(lines[0], ',');
    for (size_t i = 1; i < lines.size(); ++i) {
      std::vector<std::string> f = absl::StrSplit(lines[i], ' ');
      ASSERT_EQ(f.size(), 2u) << lines[i];
      samples_.push_back({f[0], std::stoi(f[1])});
    }
  }

  // Every record of the split in `out`: (sample bytes, label).
  std::vector<std::pair<std::string, int>> Records(const std::string& out) {
    std::vector<std::pair<std::string, int>> records;
    auto ds = Dataset::Open(Env::Default(), out);
    EXPECT_TRUE(ds.ok()) << ds.status();
    if (!ds.ok()) return records;
    for (size_t s = 0; s < (*ds)->manifest().shards.size(); ++s) {
      auto r = (*ds)->shard(s);
      EXPECT_TRUE(r.ok()) << r.status();
      std::string raw;
      for (uint32_t f = 0; f < (*r)->frame_count(); ++f) {
        EXPECT_TRUE((*r)->ReadFrame(f, &raw).ok());
        const FrameView view((*r)->spec(), (*r)->frames()[f].record_count, raw.data());
        for (uint32_t i = 0; i < view.records(); ++i) {
          records.push_back({std::string(view.sample(i), view.sample_size(i)),
                             static_cast<uint8_t>(*view.label(i))});
        }
      }
    }
    return records;
  }

  std::string FileBytes(const std::string& path) {
    return ReadFileToString(Env::Default(), path).value_or("<missing>");
  }

  std::string dir_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int>> samples_;  // torchvision's (relative path, label)
};

TEST_F(SluiceShardImagesTest, ImageFolderFromPilIsStoredInTorchvisionOrderWithItsClasses) {
  if (RunShell("/usr/bin/python3 -c 'import torchvision'").exit_code != 0) {
    GTEST_SKIP() << "needs torchvision";
  }
  const std::string root = dir_ + "/folder";
  WriteFolder(root, /*torchvision=*/true);
  const std::string out = dir_ + "/ds";
  Result r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", out,
                                   " --quiet --records-per-frame 5 --frame-bytes 3000"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("ignored 3 files (not read):\n"
                                "  Bee/README.txt: no image extension\n"
                                "  ant/README.txt: no image extension\n"
                                "  zebra/README.txt: no image extension\n"));
  auto ds = Dataset::Open(Env::Default(), out);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().class_names, classes_);
  // Each record's file, relative to the folder, in torchvision's order.
  std::vector<std::string> relative;
  for (const auto& [path, label] : samples_) relative.push_back(path);
  EXPECT_EQ((*ds)->manifest().record_sources, relative);
  // The largest image: 13 wide, up to 11 high (kWriteFolder).
  EXPECT_EQ((*ds)->manifest().image_bound, (ImageSizeBound{13, 11, 143}));
  EXPECT_EQ((*ds)->manifest().spec.encoding, SampleEncoding::kImage);
  const auto records = Records(out);
  ASSERT_EQ(records.size(), samples_.size());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].first, FileBytes(root + "/" + samples_[i].first)) << samples_[i].first;
    EXPECT_EQ(records[i].second, samples_[i].second) << samples_[i].first;
  }
  Result inspect = RunShard(absl::StrCat("inspect ", out));
  EXPECT_EQ(inspect.exit_code, 0) << inspect.text;
  EXPECT_THAT(inspect.text, HasSubstr(absl::StrCat("sample sizes (bytes, ", samples_.size(),
                                                   " records, nearest-rank percentiles):\n")));
  EXPECT_THAT(
      inspect.text,
      HasSubstr("largest image (from the files' headers; each the largest of any file): 13 wide, "
                "11 high"));
  // Each table's numeric columns end where their headers end.
  for (const char* table : {"  min  ", "  shard  ", "  label  "}) {
    const std::vector<std::string> rows = TableAfter(inspect.text, table);
    ASSERT_GE(rows.size(), 2u) << table << " in\n" << inspect.text;
    const std::vector<size_t> header = TokenEnds(rows[0]);
    for (size_t row = 1; row < rows.size(); ++row) {
      std::vector<size_t> ends = TokenEnds(rows[row]);
      ASSERT_EQ(ends.size(), header.size()) << rows[row];
      for (size_t c = 1; c < ends.size(); ++c) EXPECT_EQ(ends[c], header[c]) << rows[row];
    }
  }
  // Names and records per class, as torchvision's targets count them.
  std::vector<uint64_t> counts(classes_.size(), 0);
  for (const auto& [path, label] : samples_) ++counts[static_cast<size_t>(label)];
  EXPECT_EQ((*ds)->manifest().class_counts, counts);
  EXPECT_THAT(inspect.text,
              HasSubstr(absl::StrCat("classes (label: name (records)): 0: Bee (", counts[0],
                                     "), 1: ant (", counts[1], "), 2: zebra (", counts[2], ")")));
  EXPECT_EQ(RunShard(absl::StrCat("verify ", out)).exit_code, 0);
}

TEST_F(SluiceShardImagesTest, OutputIsByteIdenticalForOneAndTwoThreads) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  for (const char* codec : {"none", "zstd"}) {
    for (int t : {1, 2}) {
      Result r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", dir_, "/t", t,
                                       codec, " --quiet --threads ", t, " --codec ", codec,
                                       " --records-per-frame 4 --frame-bytes 2000"));
      ASSERT_EQ(r.exit_code, 0) << r.text;
    }
    Result diff = RunShell(absl::StrCat("diff -r ", dir_, "/t1", codec, " ", dir_, "/t2", codec));
    EXPECT_EQ(diff.exit_code, 0) << diff.text;
  }
}

TEST_F(SluiceShardImagesTest, ListFileRecordsFollowTheListWithItsLabels) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  // Relative to the list's folder, absolute, a path with a space, and the separators.
  const std::string list =
      absl::StrCat("folder/ant/rgb0.png,4\n", "\n", root, "/zebra/photo.JPG 0\n",
                   "folder/Bee/nested/deep.jpeg\t2\r\n");
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/list.txt", list).ok());
  const std::string out = dir_ + "/ds";
  Result r =
      RunShard(absl::StrCat("create --image-list ", dir_, "/list.txt --out ", out, " --quiet"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const auto records = Records(out);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], std::make_pair(FileBytes(root + "/ant/rgb0.png"), 4));
  EXPECT_EQ(records[1], std::make_pair(FileBytes(root + "/zebra/photo.JPG"), 0));
  EXPECT_EQ(records[2], std::make_pair(FileBytes(root + "/Bee/nested/deep.jpeg"), 2));
  auto ds = Dataset::Open(Env::Default(), out);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)->manifest().num_classes, 5u);
  ASSERT_EQ((*ds)->manifest().sources.size(), 1u);
  EXPECT_EQ((*ds)->manifest().sources[0].role, "list");
  EXPECT_EQ((*ds)->manifest().record_sources,
            (std::vector<std::string>{"folder/ant/rgb0.png", root + "/zebra/photo.JPG",
                                      "folder/Bee/nested/deep.jpeg"}));
}

TEST_F(SluiceShardImagesTest, MissingAndNonImageListedFilesAreNamedWithTheirLine) {
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/a.txt", "text").ok());
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/list.txt", "a.txt,1\n").ok());
  Result r = RunShard(absl::StrCat("create --image-list ", dir_, "/list.txt --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(dir_, "/list.txt:1: a.txt: not a JPEG or PNG image")));
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/list.txt", "\nnone.png,1\n").ok());
  r = RunShard(absl::StrCat("create --image-list ", dir_, "/list.txt --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(dir_, "/list.txt:2: none.png: ")));
}

TEST_F(SluiceShardImagesTest, BadListLineIsNamedWithItsLineNumber) {
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/list.txt", "a.png,1\nb.png,x\n").ok());
  Result r = RunShard(absl::StrCat("create --image-list ", dir_, "/list.txt --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(dir_, "/list.txt:2: \"b.png,x\": expected")));
}

TEST_F(SluiceShardImagesTest, ZeroByteNonImageAndTruncatedFilesAreNamedOrSkippedAndNamed) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  const std::string out = dir_ + "/ds";
  ASSERT_EQ(
      RunShard(absl::StrCat("create --image-folder ", root, " --out ", out, " --quiet")).exit_code,
      0);
  const std::string manifest_before = FileBytes(out + "/train.manifest.json");
  const std::string jpeg = FileBytes(root + "/ant/photo.JPG");
  const std::string png = FileBytes(root + "/ant/rgb0.png");
  const std::vector<std::tuple<std::string, std::string, std::string>> bad = {
      {"ant/empty.png", "", "/folder/ant/empty.png: zero bytes, expected a JPEG or PNG"},
      {"ant/fake.jpg", "GIF89a",
       "/folder/ant/fake.jpg: not a JPEG or PNG image (starts with 47 49 46 38 39 61"},
      // Only the end marker missing: libjpeg would warn "Premature end of JPEG file".
      {"ant/no_eoi.jpg", jpeg.substr(0, jpeg.size() - 2),
       "/folder/ant/no_eoi.jpg: truncated JPEG: no EOI marker (FF D9)"},
      {"ant/half.png", png.substr(0, png.size() / 2), "/folder/ant/half.png: truncated PNG: chunk"},
      {"ant/no_iend.png", png.substr(0, png.size() - 12),
       "/folder/ant/no_iend.png: truncated PNG: ends at byte"},
      // torchvision keeps hidden files with an image extension, and so does sluice.
      {"ant/._x.jpg", std::string("\0\5\26\7", 4),
       "/folder/ant/._x.jpg: not a JPEG or PNG image (starts with 00 05 16 07; expected FF D8 "
       "FF or 89 50 4E 47 0D 0A 1A 0A) (a hidden file; \"._*\" files are macOS metadata)"},
  };
  for (const auto& [file, contents, what] : bad) {
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), root + "/" + file, contents).ok());
    Result r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", out, " --quiet"));
    EXPECT_EQ(r.exit_code, 1) << r.text;
    EXPECT_THAT(r.text, HasSubstr(what));
    // The split written before is untouched.
    EXPECT_EQ(FileBytes(out + "/train.manifest.json"), manifest_before);
    RunShell(absl::StrCat("rm -f ", root, "/", file));
  }
  for (const auto& [file, contents, what] : bad) {
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), root + "/" + file, contents).ok());
  }
  // Without --skip-bad-images one error names them all: the first five, then a count.
  Result all = RunShard(absl::StrCat("create --image-folder ", root, " --out ", out, " --quiet"));
  EXPECT_EQ(all.exit_code, 1) << all.text;
  for (const char* name : {"._x.jpg", "empty.png", "fake.jpg", "half.png", "no_eoi.jpg"}) {
    EXPECT_THAT(all.text, HasSubstr(absl::StrCat(root, "/ant/", name, ": "))) << name;
  }
  EXPECT_THAT(all.text, HasSubstr("; and 1 more (6 files refused; --skip-bad-images leaves "
                                  "such files out)"));
  Result r = RunShard(
      absl::StrCat("create --image-folder ", root, " --out ", out, " --quiet --skip-bad-images"));
  EXPECT_EQ(r.exit_code, 0) << r.text;
  // In list order (sorted names), each with its reason.
  EXPECT_THAT(r.text, HasSubstr("skipped 6 bad image files (--skip-bad-images):\n  "));
  size_t at = r.text.find("skipped 6");
  for (const char* name : {"._x.jpg", "empty.png", "fake.jpg", "half.png", "no_eoi.jpg"}) {
    const size_t next = r.text.find(absl::StrCat(root, "/ant/", name, ": "), at);
    EXPECT_NE(next, std::string::npos) << name << " in order in " << r.text;
    at = next;
  }
  EXPECT_EQ(r.text.find("no_iend.png"), std::string::npos) << r.text;
  EXPECT_THAT(r.text, HasSubstr("\n  ... and 1 more\n"));
  EXPECT_EQ(Records(out).size(), 3u * 11u);  // 3 classes of 11 images
}

TEST_F(SluiceShardImagesTest, VerifyImagesDecodeFindsDamagedPixelDataTheStructureCheckPasses) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  std::string png = FileBytes(root + "/ant/rgb0.png");
  png[50] ^= 0x5A;  // inside the first IDAT chunk's data: the chunk structure is intact
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), root + "/ant/damaged.png", png).ok());
  const std::string create = absl::StrCat("create --image-folder ", root, " --quiet --out ");
  Result r = RunShard(create + dir_ + "/structure");
  EXPECT_EQ(r.exit_code, 0) << r.text;  // the default check does not decode
  r = RunShard(create + dir_ + "/decode --verify-images=decode");
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text,
              HasSubstr(absl::StrCat(root, "/ant/damaged.png: corrupt or truncated PNG: ")));
  r = RunShard(create + dir_ + "/decode --verify-images=decode --skip-bad-images");
  EXPECT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("skipped 1 bad image files (--skip-bad-images):\n  "));
  EXPECT_EQ(Records(dir_ + "/decode").size(), 3u * 11u);
  r = RunShard(create + dir_ + "/x --verify-images=pixels");
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--verify-images \"pixels\": expected structure or decode"));
}

TEST_F(SluiceShardImagesTest, NamesThatAreNotUtf8AreRecordedEscaped) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  // A Latin-1 class folder and file name (not UTF-8), and a backslash in a valid name.
  RunShell(absl::StrCat("mv ", root, "/ant ", root, "/$(printf 'caf\\351')"));
  RunShell(absl::StrCat("mv ", root, "/Bee/rgb0.png ", root, "/Bee/$(printf 'x\\377')\\\\y.png"));
  Result r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", dir_, "/ds --quiet"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  auto ds = Dataset::Open(Env::Default(), dir_ + "/ds");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->manifest().class_names, (std::vector<std::string>{"Bee", "caf\\xe9", "zebra"}));
  const auto& sources = (*ds)->manifest().record_sources;
  EXPECT_NE(std::find(sources.begin(), sources.end(), "Bee/x\\xff\\\\y.png"), sources.end());
  EXPECT_NE(std::find(sources.begin(), sources.end(), "caf\\xe9/photo.JPG"), sources.end());
}

TEST_F(SluiceShardImagesTest, IgnoredFilesBeyondTheFirstFiveAreCounted) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(
        WriteFileAtomically(Env::Default(), absl::StrCat(root, "/ant/notes", i, ".txt"), "x").ok());
  }
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), root + "/labels.csv", "x").ok());
  Result r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", dir_, "/ds --quiet"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  EXPECT_THAT(r.text, HasSubstr("ignored 8 files (not read):\n"
                                "  labels.csv: not in a class folder (DIR/<class>/...)\n"
                                "  Bee/README.txt: no image extension\n"
                                "  ant/README.txt: no image extension\n"
                                "  ant/notes0.txt: no image extension\n"
                                "  ant/notes1.txt: no image extension\n"
                                "  ... and 3 more\n"));
}

TEST_F(SluiceShardImagesTest, HoldoutSplitIsChosenByPathHashAndAddingFilesMovesNoOther) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  const std::string out = dir_ + "/ds";
  auto sources = [&](const std::string& split) {
    auto ds = Dataset::Open(Env::Default(), JoinPath(out, split + ".manifest.json"));
    EXPECT_TRUE(ds.ok()) << ds.status();
    return ds.ok() ? (*ds)->manifest().record_sources : std::vector<std::string>{};
  };
  Result r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", out,
                                   " --quiet --holdout-fraction 0.3 --holdout-split val"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  const std::vector<std::string> train = sources("train"), val = sources("val");
  EXPECT_EQ(train.size() + val.size(), 33u);
  for (const std::string& p : val) {
    EXPECT_LT(static_cast<double>(Xxh3(p)) * 0x1p-64, 0.3) << p;
  }
  for (const std::string& p : train) {
    EXPECT_GE(static_cast<double>(Xxh3(p)) * 0x1p-64, 0.3) << p;
  }
  EXPECT_GT(val.size(), 0u);
  // A new file goes to one side; every other file stays where it was.
  RunShell(absl::StrCat("cp ", root, "/ant/rgb0.png ", root, "/ant/new.png"));
  r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", out,
                            " --quiet --holdout-fraction 0.3 --holdout-split val"));
  ASSERT_EQ(r.exit_code, 0) << r.text;
  std::vector<std::string> val2 = sources("val");
  std::erase(val2, std::string("ant/new.png"));
  EXPECT_EQ(val2, val);
  EXPECT_EQ(sources("train").size() + sources("val").size(), 34u);
  // Both splits are checked against the same classes.
  auto ds = Dataset::Open(Env::Default(), out + "/val.manifest.json");
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ((*ds)->manifest().class_names.size(), 3u);
  r = RunShard(absl::StrCat("create --image-folder ", root, " --out ", out,
                            " --quiet --holdout-fraction 1.5"));
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--holdout-fraction \"1.5\": expected a number in (0, 1)"));
}

// A holdout rewrite wrote the new train split, then the new test split: an interruption or a
// failure between the two (here a directory where the test manifest's temporary goes) left
// the new train beside the old test, sharing files with it, and nothing said so. The old
// held-out split is now removed before the new train split is written.
TEST_F(SluiceShardImagesTest, AHoldoutRewriteFailingAtItsSecondSplitLeavesNoOldHeldOutSplit) {
  const std::string root = dir_ + "/folder";
  WriteFolder(root);
  const std::string out = dir_ + "/ds";
  auto sources = [&](const std::string& split) {
    auto ds = Dataset::Open(Env::Default(), JoinPath(out, split + ".manifest.json"));
    return ds.ok() ? (*ds)->manifest().record_sources : std::vector<std::string>{};
  };
  const std::string create =
      absl::StrCat("create --image-folder ", root, " --out ", out, " --quiet --holdout-fraction ");
  Result r = RunShard(create + "0.5");
  ASSERT_EQ(r.exit_code, 0) << r.text;
  ASSERT_FALSE(sources("test").empty());
  ASSERT_EQ(RunShell(absl::StrCat("mkdir -p ", out, "/test.manifest.json.tmp/x")).exit_code, 0);
  r = RunShard(create + "0.2");
  EXPECT_EQ(r.exit_code, 1) << r.text;
  // The new train split and no test split: never the old test split beside the new train.
  EXPECT_FALSE(Env::Default()->FileExists(out + "/test.manifest.json")) << r.text;
  const std::vector<std::string> train = sources("train");
  EXPECT_GT(train.size(), 33u / 2) << "not the F = 0.2 train split";
  for (const std::string& p : train) {
    EXPECT_GE(static_cast<double>(Xxh3(p)) * 0x1p-64, 0.2) << p;
  }
  // The names swapped (--split test --holdout-split train) remove the old train first alike.
  ASSERT_EQ(RunShell(absl::StrCat("rm -rf ", out, "/test.manifest.json.tmp")).exit_code, 0);
  ASSERT_EQ(RunShell(absl::StrCat("mkdir -p ", out, "/train.manifest.json.tmp/x")).exit_code, 0);
  r = RunShard(create + "0.3 --split test --holdout-split train");
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_FALSE(Env::Default()->FileExists(out + "/train.manifest.json")) << r.text;
  EXPECT_FALSE(sources("test").empty());
}

// A list line naming a file inside --out that looks like a shard (train-00007-<16 hex>.shard)
// was read, then removed by the write as a leftover: the user's image was lost. Such a file
// (by name, or by a link from the folder) is refused before anything is read, and kept.
TEST_F(SluiceShardImagesTest, AListedOrLinkedFileOfTheOutputDatasetIsRefusedAndKept) {
  ASSERT_EQ(RunShell(absl::StrCat("mkdir -p ", dir_, "/ds ", dir_, "/f/a && cd ", dir_,
                                  " && /usr/bin/python3 -c \"from PIL import Image; "
                                  "Image.new('RGB', (4, 4)).save('img.png')\" && cp img.png "
                                  "ds/train-00007-0123456789abcdef.shard && cp img.png f/a/0.png"))
                .exit_code,
            0);
  const std::string shard = dir_ + "/ds/train-00007-0123456789abcdef.shard";
  ASSERT_TRUE(WriteFileAtomically(Env::Default(), dir_ + "/list.txt",
                                  "img.png,0\nds/train-00007-0123456789abcdef.shard,1\n")
                  .ok());
  Result r =
      RunShard(absl::StrCat("create --image-list ", dir_, "/list.txt --out ", dir_, "/ds --quiet"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(
                          "list.txt:2: ds/train-00007-0123456789abcdef.shard is a file of the "
                          "dataset --out ",
                          dir_, "/ds writes")));
  EXPECT_TRUE(Env::Default()->FileExists(shard));
  EXPECT_FALSE(Env::Default()->FileExists(dir_ + "/ds/train.manifest.json"));
  // A folder's file that is a link to it.
  ASSERT_EQ(::symlink(shard.c_str(), (dir_ + "/f/a/1.png").c_str()), 0);
  r = RunShard(absl::StrCat("create --image-folder ", dir_, "/f --out ", dir_, "/ds --quiet"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("f/a/1.png is a file of the dataset --out "));
  EXPECT_TRUE(Env::Default()->FileExists(shard));
}

TEST_F(SluiceShardImagesTest, FilesLargerThanTheMemoryAreRefusedBeforeReading) {
  // Four sparse 200 MiB "images" (each within the 2^28 bytes of one sample, refused alone
  // from its size): their sizes, not their bytes, are what the check reads.
  RunShell(absl::StrCat("mkdir -p ", dir_, "/folder/cat && cd ", dir_,
                        "/folder/cat && truncate -s 200M a.png b.png c.png d.png"));
  Result r = RunShell(absl::StrCat("ulimit -v 1000000 && ", SLUICE_SHARD_BIN,
                                   " create --quiet --image-folder ", dir_, "/folder --out ", dir_,
                                   "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("4 image files of 800.0 MiB, held twice while sharding needs"));
}

TEST_F(SluiceShardImagesTest, ClassFolderWithoutImagesIsNamed) {
  RunShell(absl::StrCat("mkdir -p ", dir_, "/folder/cat ", dir_, "/folder/dog && echo x > ", dir_,
                        "/folder/dog/a.txt"));
  Result r = RunShard(absl::StrCat("create --image-folder ", dir_, "/folder --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("no image file in class folder(s) cat, dog"));
}

TEST_F(SluiceShardImagesTest, ImageOptionsWithArrayInputAreUsageErrors) {
  Result r = RunShard(absl::StrCat("create --cifar10 x --codec zstd --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("--codec, --skip-bad-images and --max-image-pixels apply to "
                                "--image-folder"));
  r = RunShard(absl::StrCat("create --image-folder a --image-list b --out ", dir_, "/ds"));
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_THAT(r.text, HasSubstr("give one input"));
}

}  // namespace
}  // namespace sluice
