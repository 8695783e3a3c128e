// Walking image folders and reading image lists (storage/image_files.h) on a real file system:
// symbolic-link loops, folders and files reached twice, the depth bound, FIFOs and sockets,
// list files with a byte-order mark or a NUL, and names that hold terminal escapes.
#include "storage/image_files.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The smallest JPEG the structure check accepts: SOI, a 1x1 frame header, a scan, EOI.
constexpr char kTinyJpeg[] =
    "\xff\xd8\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x01\x01\x11\x00"
    "\xff\xda\x00\x08\x01\x01\x00\x00\x3f\x00\x00\xff\xd9";

// How many times `needle` occurs in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

class ImageFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = absl::StrCat(::testing::TempDir(), "image_files_XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Writes a file (and its folders) under dir_.
  void Write(const std::string& relative,
             const std::string& bytes = std::string(kTinyJpeg, sizeof(kTinyJpeg) - 1)) {
    const fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), p.string(), bytes).ok()) << p;
  }
  void Link(const std::string& target, const std::string& relative) {
    fs::create_directories((fs::path(dir_) / relative).parent_path());
    fs::create_symlink(target, fs::path(dir_) / relative);
  }
  std::string Path(const std::string& relative) { return JoinPath(dir_, relative); }

  std::string dir_;
};

TEST_F(ImageFilesTest, LinkBackToAParentFolderIsALoopNamingTheLinkAndTheFolder) {
  // Followed, this listed one ok.jpg 41 times (the kernel's 40 links per path), exit 0.
  Write("img/cls/a/ok.jpg");
  Link("..", "img/cls/a/root");
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      list.status().message(),
      HasSubstr(absl::StrCat(Path("img/cls/a/root"), " (a symbolic link to \"..\") leads back to ",
                             Path("img/cls"), ", a folder that contains it")));
  EXPECT_THAT(list.status().message(), HasSubstr("remove the link"));
}

TEST_F(ImageFilesTest, ClassFolderLinkedToTheDatasetFolderIsALoop) {
  Write("img/cls/ok.jpg");
  Link("..", "img/cls/up");
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(
      list.status().message(),
      HasSubstr(absl::StrCat(Path("img/cls/up"), " (a symbolic link to \"..\") leads back to ",
                             Path("img"), ", a folder that contains it")));
}

TEST_F(ImageFilesTest, TwoLinksToTheSameFolderAreALoopNotAnEndlessWalk) {
  // Two links to "." doubled the paths at every level: the walk never ended (8 MB/s growth).
  // Here the first link is refused before any path is doubled.
  Write("img/cls/a/ok.jpg");
  Link(".", "img/cls/a/x");
  Link(".", "img/cls/a/y");
  // In a child process under an alarm, so that the walk's old endless loop fails the test
  // instead of hanging it.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(20);
        absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
        std::fprintf(stderr, "%s\n", std::string(list.status().message()).c_str());
        std::error_code ec;
        fs::remove_all(dir_, ec);
        std::_Exit(list.ok() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0),
      "/img/cls/a/x \\(a symbolic link to \"\\.\"\\) leads back to [^ ]*/img/cls/a, a folder");
}

TEST_F(ImageFilesTest, FolderReachedTwiceThroughALinkIsNamedWithItsFirstPath) {
  Write("img/cls/a/ok.jpg");
  Link("a", "img/cls/b");
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("img/cls/b"),
                                     " (a symbolic link to \"a\") is the same folder as ",
                                     Path("img/cls/a"))));
}

TEST_F(ImageFilesTest, LinkToAFolderOutsideIsFollowedOnce) {
  Write("img/cls/a.jpg");
  Write("outside/b.jpg");
  Link(Path("outside"), "img/cls/more");
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->sources, (std::vector<std::string>{"cls/a.jpg", "cls/more/b.jpg"}));
}

TEST_F(ImageFilesTest, FoldersDeeperThanTheBoundAreRefusedAndTheBoundItselfIsWalked) {
  std::string deep = "img/cls";  // level 1
  for (int level = 2; level <= kMaxFolderDepth; ++level) deep += "/d";
  Write(deep + "/ok.jpg");  // a file in a folder at level kMaxFolderDepth
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->paths.size(), 1u);
  Write(deep + "/d/ok.jpg");  // one level more
  list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr(absl::StrCat(": more than ", kMaxFolderDepth,
                                                              " folders below ", Path("img"))));
}

TEST_F(ImageFilesTest, OneFileListedInThreeSpellingsIsRefusedNamingTheLines) {
  // With --holdout-fraction 0.3 these landed in both splits (the hash is of the spelling).
  Write("leak/f1.jpg");
  Write("leak/f2.jpg");
  Write("list.txt", "leak/f1.jpg,0\nleak/f2.jpg,0\n./leak/f1.jpg,1\nleak//f1.jpg,0\n");
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("list.txt"), ":1: leak/f1.jpg and ", Path("list.txt"),
                                     ":3: ./leak/f1.jpg are the same file")));
  EXPECT_THAT(list.status().message(), HasSubstr("remove one of them (2 entries in all"));
}

TEST_F(ImageFilesTest, HardLinkAndSymbolicLinkToOneFileInAFolderAreRefused) {
  Write("img/cls/a.jpg");
  fs::create_directories(Path("img/other"));
  fs::create_hard_link(Path("img/cls/a.jpg"), Path("img/other/b.jpg"));
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("img/cls/a.jpg"), " and ", Path("img/other/b.jpg"),
                                     " are the same file")));
  fs::remove_all(Path("img/other"));
  Link("a.jpg", "img/cls/c.jpg");
  list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("img/cls/a.jpg"), " and ", Path("img/cls/c.jpg"),
                                     " are the same file")));
}

TEST_F(ImageFilesTest, FifoAndSocketAreBadImagesSkippedAndCountedNeverOpened) {
  Write("img/cls/a.jpg");
  ASSERT_EQ(::mkfifo(Path("img/cls/pipe.jpg").c_str(), 0644), 0);
  // A socket: bound, then left behind as a file-system entry.
  const std::string sock = Path("img/cls/sock.png");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);

  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->paths.size(), 3u);
  absl::StatusOr<ImageRecords> read = ReadImageFiles(Env::Default(), *list, {});
  ASSERT_FALSE(read.ok());
  const std::string message(read.status().message());
  // Named once each (it read "x: x: is not a regular file"), and refused, not a read error.
  EXPECT_THAT(message, HasSubstr(absl::StrCat(Path("img/cls/pipe.jpg"),
                                              ": is not a regular file (a FIFO), expected a JPEG "
                                              "or PNG file")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat(Path("img/cls/sock.png"),
                                              ": is not a regular file (a socket)")));
  EXPECT_EQ(Count(message, Path("img/cls/pipe.jpg")), 1u) << message;
  EXPECT_THAT(message, HasSubstr("(2 files refused; --skip-bad-images leaves such files out)"));

  ReadImagesOptions skip;
  skip.skip_bad_images = true;
  read = ReadImageFiles(Env::Default(), *list, skip);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->records.samples.size(), 1u);
  EXPECT_EQ(read->skipped, 2u);
  ASSERT_EQ(read->skipped_examples.size(), 2u);
  EXPECT_THAT(read->skipped_examples[0], HasSubstr("pipe.jpg: is not a regular file (a FIFO)"));
}

// A space after the label (spaces separate too) left an empty label; the message said only
// what a line should be (the sixth hostile trial).
TEST_F(ImageFilesTest, ASpaceAfterTheLabelIsNamedAsTheCause) {
  Write("a.jpg");
  for (const char* text : {"a.jpg,1 \n", "a.jpg,\t\n"}) {
    Write("list.txt", text);
    absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
    ASSERT_FALSE(list.ok()) << text;
    EXPECT_THAT(list.status().message(),
                HasSubstr("the line ends in a space or tab after its label"));
  }
  Write("list.txt", "a.jpg,x\n");
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), Not(HasSubstr("space or tab")));
}

TEST_F(ImageFilesTest, MissingFileIsNamedOnce) {
  Write("a.jpg");
  Write("list.txt", "a.jpg,0\ndead.jpg,0\n");
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_TRUE(list.ok()) << list.status();
  ReadImagesOptions skip;
  skip.skip_bad_images = true;  // a missing file is an error, not a bad image
  absl::StatusOr<ImageRecords> read = ReadImageFiles(Env::Default(), *list, skip);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  const std::string message(read.status().message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat(Path("list.txt"), ":2: dead.jpg: stat failed")));
  EXPECT_EQ(Count(message, "dead.jpg"), 1u) << message;
}

TEST_F(ImageFilesTest, BrokenSymbolicLinkIsABadImageNamingWhereItPoints) {
  // It failed the run with "stat failed: No such file or directory", even with
  // --skip-bad-images, and never said it was a link.
  Write("img/cls/a.jpg");
  Link("/nonexistent", "img/cls/dang.jpg");
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->paths.size(), 2u);
  absl::StatusOr<ImageRecords> read = ReadImageFiles(Env::Default(), *list, {});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              HasSubstr(absl::StrCat(Path("img/cls/dang.jpg"),
                                     ": is a broken symbolic link to /nonexistent (")));
  ReadImagesOptions skip;
  skip.skip_bad_images = true;
  read = ReadImageFiles(Env::Default(), *list, skip);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->records.samples.size(), 1u);
  EXPECT_EQ(read->skipped, 1u);
}

// Reports a size of 4096 bytes for every file, as /proc and /sys files do, and reads what the
// file holds.
class KernelFileSizeEnv : public Env {
 public:
  class File : public RandomAccessFile {
   public:
    explicit File(std::unique_ptr<RandomAccessFile> base) : base_(std::move(base)) {}
    absl::StatusOr<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
      return base_->Read(offset, n, scratch);
    }
    uint64_t Size() const override { return 4096; }
    const std::string& path() const override { return base_->path(); }

   private:
    std::unique_ptr<RandomAccessFile> base_;
  };
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    auto base = base_->NewRandomAccessFile(path);
    if (!base.ok()) return base.status();
    return std::unique_ptr<RandomAccessFile>(new File(std::move(*base)));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& p) override {
    return base_->NewWritableFile(p);
  }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string&) override { return 4096; }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& d) override {
    return base_->GetChildren(d);
  }
  absl::Status CreateDirs(const std::string& d) override { return base_->CreateDirs(d); }
  absl::Status DeleteFile(const std::string& p) override { return base_->DeleteFile(p); }
  absl::Status RenameFile(const std::string& f, const std::string& t) override {
    return base_->RenameFile(f, t);
  }
  absl::Status SyncDir(const std::string& d) override { return base_->SyncDir(d); }
  absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& p) override {
    return base_->LockFile(p);
  }

 private:
  Env* base_ = Env::Default();
};

TEST_F(ImageFilesTest, FileReadingShorterThanItsSizeIsABadImage) {
  // /sys/kernel/mm/transparent_hugepage/enabled in a list failed the whole run ("short read"),
  // even with --skip-bad-images.
  Write("a.jpg");
  Write("list.txt", "a.jpg,0\n");
  KernelFileSizeEnv env;
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_TRUE(list.ok()) << list.status();
  absl::StatusOr<ImageRecords> read = ReadImageFiles(&env, *list, {});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(read.status().message(),
              HasSubstr(absl::StrCat(Path("list.txt"), ":1: a.jpg: read ", sizeof(kTinyJpeg) - 1,
                                     " bytes of the 4096 its size says")));
  ReadImagesOptions skip;
  skip.skip_bad_images = true;
  read = ReadImageFiles(&env, *list, skip);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->records.samples.size(), 0u);
  EXPECT_EQ(read->skipped, 1u);
}

TEST_F(ImageFilesTest, ListedPathIsUsedExactlyAsWrittenSpacesIncluded) {
  // "x.jpg ,0" was trimmed to "x.jpg": another file, read silently.
  const std::string jpeg(kTinyJpeg, sizeof(kTinyJpeg) - 1);
  Write("L2/x.jpg ", jpeg);
  Write("L2/x.jpg", "\x89PNG other file");
  Write("L2/list.txt", "x.jpg ,0\nx.jpg, 1\n");
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("L2/list.txt"));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->paths.size(), 2u);
  EXPECT_EQ(list->paths[0], Path("L2/x.jpg "));
  EXPECT_EQ(list->sources[0], "x.jpg ");
  // Spaces after a ',' are part of the separator.
  EXPECT_EQ(list->paths[1], Path("L2/x.jpg"));
  EXPECT_EQ(list->labels[1], 1u);
}

TEST_F(ImageFilesTest, ListedPathWithSpacesThatExistsOnlyTrimmedSaysSo) {
  Write("y.jpg");
  Write("list.txt", " y.jpg,0\n");
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("list.txt"),
                                     ":1: \" y.jpg\" does not exist, but \"y.jpg\" does")));
}

TEST_F(ImageFilesTest, LeadingByteOrderMarkOfAListIsSkipped) {
  Write("leak/f1.jpg");
  Write("list.txt", "\xEF\xBB\xBFleak/f1.jpg,0\n");
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->paths, (std::vector<std::string>{Path("leak/f1.jpg")}));
  EXPECT_EQ(list->sources, (std::vector<std::string>{"leak/f1.jpg"}));
}

TEST_F(ImageFilesTest, Utf16ListIsRefusedAsNotUtf8) {
  Write("list.txt", std::string("\xFF\xFEl\0,\0001\0\n\0", 10));
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("list.txt"),
                                     ": starts with a UTF-16 byte-order mark; "
                                     "expected UTF-8 text")));
}

TEST_F(ImageFilesTest, NulInAListLineIsRefusedNamingTheLine) {
  // The message used to stop at the NUL; the path before it was looked for instead.
  Write("leak/f1.jpg");
  Write("list.txt", std::string("leak/f1.jpg,0\nleak/f\0.jpg,1\n", 28));
  absl::StatusOr<ImageList> list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(list.status().message(),
              HasSubstr(absl::StrCat(Path("list.txt"), ":2: a NUL byte at column 7")));
  EXPECT_EQ(list.status().message().find('\0'), absl::string_view::npos);
}

TEST_F(ImageFilesTest, AnsiEscapesInNamesReachTheMessageAsText) {
  const std::string red = "\x1b[31mred";
  Write("img/cls/" + red + ".jpg", "not an image");
  Write("img/cls/" + red + ".txt", "x");
  Write("img/cls/ok.jpg");
  absl::StatusOr<ImageList> list = ListImageFolder(Path("img"));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->ignored_examples.size(), 1u);
  EXPECT_EQ(list->ignored_examples[0], "cls/\\x1b[31mred.txt: no image extension");
  absl::StatusOr<ImageRecords> read = ReadImageFiles(Env::Default(), *list, {});
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("cls/\\x1b[31mred.jpg: not a JPEG or PNG"));
  EXPECT_THAT(std::string(read.status().message()), Not(HasSubstr("\x1b")));
  // A class folder's name, and a list line.
  fs::create_directories(Path("img/" + red));
  list = ListImageFolder(Path("img"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("no image file in class folder(s) \\x1b[31mred"));
  Write("list.txt", red + ".jpg,x\n");
  list = ReadImageListFile(Env::Default(), Path("list.txt"));
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr(":1: \"\\x1b[31mred.jpg,x\": expected"));
}

}  // namespace
}  // namespace sluice
