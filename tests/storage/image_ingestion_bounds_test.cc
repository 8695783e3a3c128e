// The bounds ingestion (ReadImageFiles, `sluice-shard create --image-folder/--image-list`)
// puts on each image file before it becomes a record: a file over 2^28 bytes is refused from
// its size without being read, an image whose header declares more pixels than the bound
// (PIL's Image.MAX_IMAGE_PIXELS by default) is refused naming its size, and the largest label
// and the holdout fraction are named as the user wrote them.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "common/testing/fault_injection_env.h"
#include "storage/dataset_writer.h"
#include "storage/image_files.h"
#include "storage/image_structure.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// CRC-32 of PNG chunks (ISO 3309, the polynomial 0xEDB88320), bit by bit.
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

// A PNG that passes the structure check, every chunk's CRC valid: IHDR declaring
// width x height (8-bit RGB), one IDAT of 12 bytes, IEND. 69 bytes whatever it declares.
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

// A baseline JPEG that passes the structure check: SOI, a frame header (SOF0) declaring
// width x height, one scan of two bytes, EOI.
std::string TinyJpeg(uint16_t width, uint16_t height) {
  std::string j("\xFF\xD8", 2);
  j.append("\xFF\xC0\x00\x0B\x08", 5);
  for (uint16_t v : {height, width}) {
    j.push_back(static_cast<char>(v >> 8));
    j.push_back(static_cast<char>(v & 0xFF));
  }
  j.append("\x01\x01\x11\x00", 4);
  j.append("\xFF\xDA\x00\x08\x01\x01\x00\x00\x3F\x00", 10);
  j.append("\x12\x34", 2);
  j.append("\xFF\xD9", 2);
  return j;
}

// Env::Default() that records every path opened for reading.
class OpenRecordingEnv : public FaultInjectionEnv {
 public:
  OpenRecordingEnv() : FaultInjectionEnv(Env::Default()) {}
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    absl::MutexLock l(&mu_);
    opened_.insert(path);
    return Env::Default()->NewRandomAccessFile(path);
  }
  std::set<std::string> opened() {
    absl::MutexLock l(&mu_);
    return opened_;
  }

 private:
  absl::Mutex mu_;
  std::set<std::string> opened_;
};

// Peak resident memory of this process so far, in bytes.
uint64_t PeakResidentBytes() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

class ImageIngestionBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "image_ingestion_bounds_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_).ok());
  }
  void TearDown() override {
    for (const std::string& p : list_.paths) ::unlink(p.c_str());
    ::rmdir(dir_.c_str());
  }

  // Writes `bytes` as file `name` of dir_, grown (sparse: no block is written) to `size` bytes
  // when larger, and lists it with label 0.
  void Add(const std::string& name, const std::string& bytes, uint64_t size = 0) {
    const std::string path = absl::StrCat(dir_, "/", name);
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), path, bytes).ok());
    if (size > bytes.size()) {
      ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
    }
    list_.paths.push_back(path);
    list_.names.push_back(path);
    list_.sources.push_back(name);
    list_.labels.push_back(0);
  }

  std::string dir_;
  ImageList list_;
};

TEST_F(ImageIngestionBoundsTest, FilesOverTheSampleLimitAreRefusedFromTheirSizeUnread) {
  Add("ok.png", TinyPng(8, 8));
  // 1 GiB starting like a JPEG, and a JPEG whose data runs to 300 MB: sparse, so cheap here,
  // but read, each would take its whole size in memory.
  Add("big.jpg", TinyJpeg(8, 8).substr(0, 3), uint64_t{1} << 30);
  Add("over.jpg", TinyJpeg(8, 8), uint64_t{300} << 20);
  OpenRecordingEnv env;
  const uint64_t peak_before = PeakResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ImageRecords> r = ReadImageFiles(&env, list_, ReadImagesOptions{});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(r.status().message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat(
                           list_.names[1],
                           ": 1073741824 bytes, more than the 268435456-byte (256 MiB) limit of "
                           "one image file; refused from its size, unread")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat(list_.names[2], ": 314572800 bytes, more than")));
  EXPECT_THAT(message, HasSubstr("(2 files refused; --skip-bad-images leaves such files out)"));
  // Neither was opened: only ok.png was read, and the peak resident memory did not grow by
  // anything near their sizes.
  EXPECT_EQ(env.opened(), std::set<std::string>{list_.paths[0]});
  EXPECT_LT(PeakResidentBytes(), peak_before + (uint64_t{100} << 20));
  EXPECT_LT(seconds, 10.0);

  ReadImagesOptions skip;
  skip.skip_bad_images = true;
  r = ReadImageFiles(&env, list_, skip);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records.samples.size(), 1u);
  EXPECT_EQ(r->records.sources, std::vector<std::string>{"ok.png"});
  EXPECT_EQ(r->skipped, 2u);
  ASSERT_EQ(r->skipped_examples.size(), 2u);
  EXPECT_THAT(r->skipped_examples[0], HasSubstr("big.jpg: 1073741824 bytes, more than the"));
  EXPECT_THAT(r->skipped_examples[1], HasSubstr("over.jpg: 314572800 bytes, more than the"));
}

// A 69-byte PNG declaring 60000x60000 used to pass and set the split's bound to 60000x60000:
// every preprocess thread's scratch was then sized for 3.6e9 pixels. PIL's default bound
// refuses it at ingestion, naming the file, its size, the bound and the flag.
TEST_F(ImageIngestionBoundsTest, AnImageDeclaringMorePixelsThanTheBoundIsRefusedNamingIt) {
  const std::string huge = TinyPng(60000, 60000);
  ASSERT_EQ(huge.size(), 69u);
  ASSERT_TRUE(CheckImageStructure(huge).ok());
  Add("ok.png", TinyPng(8, 8));
  Add("huge.png", huge);
  Add("huge.jpg", TinyJpeg(65535, 65535));
  Add("wide.png", TinyPng(60000, 1));  // 60000 pixels: far within the bound
  Add("tall.png", TinyPng(1, 60000));
  absl::StatusOr<ImageRecords> r = ReadImageFiles(Env::Default(), list_, ReadImagesOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(r.status().message());
  EXPECT_THAT(message,
              HasSubstr(absl::StrCat(
                  list_.names[1],
                  ": declares 60000x60000 = 3600000000 pixels (width x height), more than the "
                  "bound of 89478485 (--max-image-pixels; the default is PIL's "
                  "Image.MAX_IMAGE_PIXELS, 89478485, and 0 means no bound)")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat(list_.names[2],
                                              ": declares 65535x65535 = 4294836225 pixels")));
  EXPECT_THAT(message, HasSubstr("(2 files refused; --skip-bad-images leaves such files out)"));
  EXPECT_THAT(message, Not(HasSubstr("wide.png")));

  // Skipped and counted with skip_bad_images.
  ReadImagesOptions skip;
  skip.skip_bad_images = true;
  r = ReadImageFiles(Env::Default(), list_, skip);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records.sources, (std::vector<std::string>{"ok.png", "wide.png", "tall.png"}));
  EXPECT_EQ(r->skipped, 2u);

  // The bound is inclusive, and 0 means none (PIL's MAX_IMAGE_PIXELS = None).
  ReadImagesOptions exact;
  exact.max_image_pixels = uint64_t{65535} * 65535;
  EXPECT_TRUE(ReadImageFiles(Env::Default(), list_, exact).ok());
  exact.max_image_pixels -= 1;
  r = ReadImageFiles(Env::Default(), list_, exact);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("huge.jpg: declares 65535x65535"));
  EXPECT_THAT(std::string(r.status().message()), Not(HasSubstr("huge.png")));
  ReadImagesOptions none;
  none.max_image_pixels = 0;
  r = ReadImageFiles(Env::Default(), list_, none);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->records.samples.size(), 5u);
}

// The documented largest label: 2^31 - 2, since num_classes (the largest label + 1) is at most
// 2^31 - 1. A list line of 2147483647 used to pass the list and fail later as "num_classes
// 2147483648", naming neither the file nor the line.
TEST_F(ImageIngestionBoundsTest, ALabelPastTheLargestIsRefusedNamingTheListLine) {
  const std::string list = dir_ + "/list.txt";
  ASSERT_TRUE(
      WriteFileAtomically(Env::Default(), list, "a.png,2147483646\nb.png,2147483647\n").ok());
  absl::StatusOr<ImageList> l = ReadImageListFile(Env::Default(), list);
  ::unlink(list.c_str());
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(std::string(l.status().message()),
            absl::StrCat(list,
                         ":2: label 2147483647: the largest label is 2147483646 (2^31 - 2: "
                         "num_classes, the largest label + 1, is at most 2^31 - 1)"));

  // i32 labels from any other input (IDX, .npy, sluice.write_dataset): named by record.
  EncodedRecords r;
  r.samples = {TinyPng(1, 1), TinyPng(1, 1)};
  r.label_dtype = LabelDType::kI32;
  r.labels = std::string("\xFE\xFF\xFF\x7F\xFF\xFF\xFF\x7F", 8);  // 2^31 - 2, 2^31 - 1
  absl::StatusOr<uint32_t> classes = CheckLabels(r, std::nullopt);
  ASSERT_FALSE(classes.ok());
  EXPECT_THAT(std::string(classes.status().message()),
              HasSubstr("label of record 1 is 2147483647: the largest label is 2147483646"));
  r.labels.resize(4);
  r.samples.resize(1);
  classes = CheckLabels(r, std::nullopt);
  ASSERT_TRUE(classes.ok()) << classes.status();
  EXPECT_EQ(*classes, 2147483647u);
}

TEST(HoldOutTest, TheFractionIsPrintedAsGivenNotRounded) {
  EncodedRecords r;
  r.samples = {TinyPng(1, 1)};
  r.labels = std::string(1, '\0');
  r.sources = {"a.png"};
  absl::StatusOr<HeldOutRecords> h = HoldOut(r, 1.0000001);
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(std::string(h.status().message()),
              HasSubstr("holdout fraction 1.0000001: expected in (0, 1)"));
}

}  // namespace
}  // namespace sluice
