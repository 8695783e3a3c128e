// sluice-shard create on array input that is named twice or larger than the memory: a CIFAR-10
// batch given twice, sparse files of 3 GB (CIFAR-10, IDX, .npy) and a small .gz IDX file whose
// header declares 3 GB, each under `ulimit -v`, where each used to end in std::bad_alloc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/coding.h"
#include "common/env.h"
#include "tests/tools/tool_runner.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunShell;
using testing::ToolOutput;

class SluiceShardArrayInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "sluice_shard_array_input_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Path(const std::string& relative) { return JoinPath(dir_, relative); }

  // `head`, then zeros up to `size` bytes in all: a sparse file, no disk used.
  void WriteSparse(const std::string& relative, const std::string& head, uint64_t size) {
    ASSERT_TRUE(WriteFileAtomically(Env::Default(), Path(relative), head).ok());
    ASSERT_EQ(::truncate(Path(relative).c_str(), static_cast<off_t>(size)), 0);
  }

  // sluice-shard with `args` under `ulimit -v 1000000` (about 1 GB of address space), ended
  // after 60 s if it has not ended by itself.
  ToolOutput ShardUnderOneGB(const std::string& args) {
    return RunShell(absl::StrCat("ulimit -v 1000000 && timeout 60 ", SLUICE_SHARD_BIN,
                                 " create --quiet ", args, " --out ", Path("ds")));
  }

  // An IDX header: magic {0, 0, 0x08, dims}, then each dimension big-endian.
  static std::string IdxHeader(std::initializer_list<uint32_t> dims) {
    std::string h = {0, 0, 0x08, static_cast<char>(dims.size())};
    for (uint32_t d : dims) {
      char b[4];
      EncodeBigEndian32(b, d);
      h.append(b, 4);
    }
    return h;
  }

  // What np.lib.format.open_memmap writes before the data: a version 1.0 header, the dict
  // padded with spaces and a newline to a multiple of 64 bytes in all.
  static std::string NpyHead(std::string dict) {
    dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
    dict.push_back('\n');
    std::string head("\x93NUMPY\x01\x00", 8);
    head.push_back(static_cast<char>(dict.size() & 0xff));
    head.push_back(static_cast<char>(dict.size() >> 8));
    return head + dict;
  }

  std::string dir_;
};

TEST_F(SluiceShardArrayInputTest, ACifarBatchGivenTwiceIsRefusedNamingBothSpellings) {
  // Exit 0 with every record twice.
  fs::create_directories(Path("d"));
  ASSERT_TRUE(
      WriteFileAtomically(Env::Default(), Path("d/data_batch_1.bin"), std::string(3073, '\x01'))
          .ok());
  const ToolOutput r = RunShell(
      absl::StrCat("cd ", dir_, " && timeout 60 ", SLUICE_SHARD_BIN,
                   " create --quiet --cifar10 d/data_batch_1.bin,./d/data_batch_1.bin --out ds"));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr("d/data_batch_1.bin and ./d/data_batch_1.bin are the same file"));
  EXPECT_FALSE(fs::exists(Path("ds/train.manifest.json")));
}

TEST_F(SluiceShardArrayInputTest, ASparse3GBCifarFileIsRefusedBeforeReadingNamingTheBytes) {
  WriteSparse("h.bin", "", 3073000000);  // 1,000,000 records of zeros
  const ToolOutput r = ShardUnderOneGB(absl::StrCat("--cifar10 ", Path("h.bin")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_LT(r.seconds, 20) << r.text;  // nothing read (it read for 20 s, then bad_alloc)
  EXPECT_THAT(r.text,
              HasSubstr(absl::StrCat(Path("h.bin"),
                                     ": 2.9 GiB of input, held twice while sharding (the "
                                     "files and their records), needs 5.7 GiB, more than the")));
  EXPECT_THAT(r.text, HasSubstr("ulimit -v 1000000 KiB"));
  EXPECT_THAT(r.text, Not(HasSubstr("bad_alloc")));
}

TEST_F(SluiceShardArrayInputTest, AnIdxPairDeclaring300000x100x100IsRefusedBeforeReading) {
  WriteSparse("images", IdxHeader({300000, 100, 100}), 16 + uint64_t{3000000000});
  WriteSparse("labels", IdxHeader({300000}), 8 + 300000);
  const ToolOutput r =
      ShardUnderOneGB(absl::StrCat("--images ", Path("images"), " --labels ", Path("labels")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("images"), " and ", Path("labels"),
                                             ": 2.8 GiB of input, held twice while sharding")));
  EXPECT_THAT(r.text, Not(HasSubstr("bad_alloc")));
}

TEST_F(SluiceShardArrayInputTest, ASmallGzipIdxDeclaring3GBIsRefusedFromItsHeader) {
  // 3.2 MB of incompressible bytes stored in a .gz (deflate's 1032:1 bound then allows 3 GB):
  // the header's 300000x100x100 is checked against the memory before the values are allocated.
  std::string raw = IdxHeader({300000, 100, 100});
  std::mt19937 rng(1);
  for (int i = 0; i < 3200000; ++i) raw.push_back(static_cast<char>(rng()));
  gzFile gz = gzopen(Path("images.gz").c_str(), "wb0");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, raw.data(), static_cast<unsigned>(raw.size())),
            static_cast<int>(raw.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  WriteSparse("labels", IdxHeader({300000}), 8 + 300000);
  const ToolOutput r =
      ShardUnderOneGB(absl::StrCat("--images ", Path("images.gz"), " --labels ", Path("labels")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("images.gz"),
                                             ": IDX images of dimensions 300000x100x100 "
                                             "(3000000000 bytes of values) needs 2.8 GiB")));
  EXPECT_THAT(r.text, Not(HasSubstr("bad_alloc")));
}

TEST_F(SluiceShardArrayInputTest, AMemmappedNpyOf300000x100x100IsRefusedBeforeReading) {
  const std::string head =
      NpyHead("{'descr': '|u1', 'fortran_order': False, 'shape': (300000, 100, 100), }");
  WriteSparse("x.npy", head, head.size() + uint64_t{3000000000});
  const std::string labels_head =
      NpyHead("{'descr': '|u1', 'fortran_order': False, 'shape': (300000,), }");
  WriteSparse("y.npy", labels_head, labels_head.size() + 300000);
  const ToolOutput r =
      ShardUnderOneGB(absl::StrCat("--images ", Path("x.npy"), " --labels ", Path("y.npy")));
  EXPECT_EQ(r.exit_code, 1) << r.text;
  EXPECT_THAT(r.text, HasSubstr(absl::StrCat(Path("x.npy"), " and ", Path("y.npy"),
                                             ": 2.8 GiB of input, held twice while sharding")));
  EXPECT_THAT(r.text, Not(HasSubstr("bad_alloc")));
}

}  // namespace
}  // namespace sluice
