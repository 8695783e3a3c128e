// The local cache of fetched byte ranges (storage/remote/frame_cache.h) on a real file system:
// hits and misses, the on-disk entry byte for byte against docs/formats/remote-cache.md, bad
// entries (flipped, cut short, another key's) refused and removed, least-recently-used
// eviction under the bound, a directory that cannot be written, and two caches on one directory.
#include "storage/remote/frame_cache.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "xxhash.h"

namespace sluice::remote {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr size_t kHeader = 32;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
uint64_t LittleEndian(const std::string& bytes, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return v;
}
// `n` bytes that differ from one `seed` to another.
std::string Payload(size_t n, int seed) {
  std::string p(n, '\0');
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<char>((i * 31 + static_cast<size_t>(seed) * 7) & 0xff);
  return p;
}

class FrameCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = absl::StrCat(::testing::TempDir(), "frame_cache_XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Where docs/formats/remote-cache.md puts the entry of `key`, computed here independently.
  std::string DocPath(const std::string& key) const {
    const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
    char hex[33];
    std::snprintf(hex, sizeof(hex), "%016" PRIx64 "%016" PRIx64, static_cast<uint64_t>(h.high64),
                  static_cast<uint64_t>(h.low64));
    return absl::StrCat(dir_, "/remote/v1/", std::string(hex, 2), "/", hex, ".slc");
  }
  // Every regular file under the cache's root, and their total bytes.
  std::vector<std::string> Files(uint64_t* total = nullptr) const {
    std::vector<std::string> out;
    uint64_t bytes = 0;
    std::error_code ec;
    const fs::path root = fs::path(dir_) / "remote" / "v1";
    if (!fs::exists(root)) return out;
    for (const auto& e : fs::recursive_directory_iterator(root, ec)) {
      if (!e.is_regular_file()) continue;
      out.push_back(e.path().string());
      bytes += e.file_size();
    }
    if (total != nullptr) *total = bytes;
    return out;
  }
  static void SetMtime(const std::string& path, time_t seconds) {
    struct timespec times[2];
    times[0].tv_sec = seconds;
    times[0].tv_nsec = 0;
    times[1] = times[0];
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
  }
  static time_t Mtime(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return -1;
    return st.st_mtim.tv_sec;
  }

  std::string dir_;
};

TEST_F(FrameCacheTest, KeyIsFourLinesAsTheDocumentSays) {
  EXPECT_EQ(FrameCache::Key("s3://bucket/prefix/train-00000.shard",
                            "\"9b2cf535f27731c974343645a3985328\"", 1048640, 262144),
            "s3://bucket/prefix/train-00000.shard\n\"9b2cf535f27731c974343645a3985328\"\n"
            "1048640\n262144\n");
  EXPECT_EQ(FrameCache::Key("https://h/x", "", 0, 7), "https://h/x\n\n0\n7\n");
}

TEST_F(FrameCacheTest, InsertThenLookupGivesTheBytesBack) {
  FrameCache cache(dir_, 1 << 20);
  EXPECT_EQ(cache.root(), dir_ + "/remote/v1");
  EXPECT_EQ(cache.max_bytes(), uint64_t{1} << 20);
  const std::string key = FrameCache::Key("s3://b/train.shard", "\"e1\"", 4096, 1000);
  const std::string payload = Payload(1000, 1);
  EXPECT_FALSE(cache.Contains(key));
  cache.Insert(key, payload);
  EXPECT_TRUE(cache.Contains(key));

  std::string got(1000, '\0');
  ASSERT_TRUE(cache.Lookup(key, got.size(), got.data()));
  EXPECT_EQ(got, payload);
  const CacheStats s = cache.Stats();
  EXPECT_EQ(s.inserted, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.hit_bytes, 1000u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.bad_entries, 0u);
  EXPECT_FALSE(s.writes_off);
}

TEST_F(FrameCacheTest, AnotherKeyMissesAndAMissIsNotABadEntry) {
  FrameCache cache(dir_, 1 << 20);
  cache.Insert(FrameCache::Key("s3://b/k", "\"e1\"", 0, 10), Payload(10, 1));
  std::string got(10, '\0');
  // Another offset, another ETag (the object was replaced), another path.
  for (const std::string& other :
       {FrameCache::Key("s3://b/k", "\"e1\"", 10, 10), FrameCache::Key("s3://b/k", "\"e2\"", 0, 10),
        FrameCache::Key("s3://b/other", "\"e1\"", 0, 10)}) {
    EXPECT_FALSE(cache.Contains(other));
    EXPECT_FALSE(cache.Lookup(other, got.size(), got.data()));
  }
  const CacheStats s = cache.Stats();
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.bad_entries, 0u);
  EXPECT_EQ(Files().size(), 1u);  // a miss removes nothing
}

TEST_F(FrameCacheTest, OnDiskEntryMatchesTheDocumentedLayout) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key =
      FrameCache::Key("s3://bucket/prefix/train-00000.shard", "\"abc\"", 1048640, 300);
  const std::string payload = Payload(300, 9);
  cache.Insert(key, payload);

  const std::string path = DocPath(key);
  ASSERT_TRUE(fs::exists(path)) << path;
  const std::vector<std::string> files = Files();
  ASSERT_EQ(files.size(), 1u);  // no temporary left beside it
  EXPECT_EQ(files[0], path);

  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), kHeader + key.size() + payload.size());
  EXPECT_EQ(bytes.substr(0, 8), "SLCACHE1");
  EXPECT_EQ(LittleEndian(bytes, 8, 4), key.size());
  EXPECT_EQ(LittleEndian(bytes, 12, 4), 0u);  // reserved
  EXPECT_EQ(LittleEndian(bytes, 16, 8), payload.size());
  EXPECT_EQ(LittleEndian(bytes, 24, 8), XXH3_64bits(payload.data(), payload.size()));
  EXPECT_EQ(bytes.substr(kHeader, key.size()), key);
  EXPECT_EQ(bytes.substr(kHeader + key.size()), payload);
}

TEST_F(FrameCacheTest, AnEntryWrittenByTheDocumentedLayoutIsRead) {
  // A writer following only the document (another implementation, another version) is read.
  const std::string key = FrameCache::Key("https://h/d.shard", "\"x\"", 0, 5);
  const std::string payload = "hello";
  std::string entry = "SLCACHE1";
  auto put = [&](uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i) entry.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(key.size(), 4);
  put(0, 4);
  put(payload.size(), 8);
  put(XXH3_64bits(payload.data(), payload.size()), 8);
  entry += key + payload;
  const std::string path = DocPath(key);
  fs::create_directories(fs::path(path).parent_path());
  WriteBytes(path, entry);

  FrameCache cache(dir_, 1 << 20);
  EXPECT_TRUE(cache.Contains(key));
  std::string got(5, '\0');
  ASSERT_TRUE(cache.Lookup(key, 5, got.data()));
  EXPECT_EQ(got, payload);
}

// The payload is hashed by a process that did not write or check the entry (a later run, as
// here, or another rank).
TEST_F(FrameCacheTest, AFlippedPayloadByteIsABadEntryThatIsRemoved) {
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 64);
  FrameCache(dir_, 1 << 20).Insert(key, Payload(64, 3));
  FrameCache cache(dir_, 1 << 20);
  const std::string path = DocPath(key);
  std::string bytes = ReadBytes(path);
  bytes[bytes.size() - 10] ^= 0x01;
  WriteBytes(path, bytes);

  std::string got(64, '\0');
  EXPECT_FALSE(cache.Lookup(key, 64, got.data()));
  const CacheStats s = cache.Stats();
  EXPECT_EQ(s.bad_entries, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(cache.Contains(key));
  // Fetched again and inserted again, it hits.
  cache.Insert(key, Payload(64, 3));
  ASSERT_TRUE(cache.Lookup(key, 64, got.data()));
  EXPECT_EQ(got, Payload(64, 3));
}

// An entry this process wrote is read without rehashing its payload only for a caller that
// checks the bytes itself (a shard's reader: the format doc, "Reading"); any other caller's
// read is hashed, known or not.
TEST_F(FrameCacheTest, AKnownEntryIsRehashedUnlessTheCallerChecksTheBytes) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 64);
  cache.Insert(key, Payload(64, 7));
  const std::string path = DocPath(key);
  std::string bytes = ReadBytes(path);
  bytes[bytes.size() - 10] ^= 0x01;
  WriteBytes(path, bytes);
  std::string got(64, '\0');
  // Trusted: the damaged byte reaches the caller, whose own checksum is then what catches it.
  ASSERT_TRUE(cache.Lookup(key, 64, got.data(), /*trust_known=*/true));
  EXPECT_NE(got, Payload(64, 7));
  // Not trusted: the hash finds the damage, and the entry goes.
  EXPECT_FALSE(cache.Lookup(key, 64, got.data()));
  EXPECT_EQ(cache.Stats().bad_entries, 1u);
  EXPECT_FALSE(fs::exists(path));
}

// Known or not, an entry's file must be there: removed by another process, it is a miss, and
// the process forgets every entry it knew (another process's eviction removed about a tenth).
TEST_F(FrameCacheTest, AKnownEntryRemovedByAnotherProcessIsAMissAndAllIsForgotten) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 64);
  const std::string other = FrameCache::Key("s3://b/k", "\"e\"", 64, 64);
  cache.Insert(key, Payload(64, 5));
  cache.Insert(other, Payload(64, 6));
  std::string got(64, '\0');
  ASSERT_TRUE(cache.Lookup(key, 64, got.data(), /*trust_known=*/true));
  ASSERT_TRUE(fs::remove(DocPath(key)));
  ASSERT_TRUE(fs::remove(DocPath(other)));
  EXPECT_TRUE(cache.Contains(key));  // known: no file system call
  EXPECT_TRUE(cache.Contains(other));
  EXPECT_FALSE(cache.Lookup(key, 64, got.data(), /*trust_known=*/true));
  EXPECT_FALSE(cache.Contains(key));
  EXPECT_FALSE(cache.Contains(other));  // forgotten too: asked of the file system
  const CacheStats s = cache.Stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.bad_entries, 0u);
}

// A known entry's size, magic, key and length are still checked on every read.
TEST_F(FrameCacheTest, AKnownEntryCutShortIsStillABadEntry) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 64);
  cache.Insert(key, Payload(64, 6));
  const std::string path = DocPath(key);
  std::string bytes = ReadBytes(path);
  WriteBytes(path, bytes.substr(0, bytes.size() - 1));
  std::string got(64, '\0');
  EXPECT_FALSE(cache.Lookup(key, 64, got.data()));
  EXPECT_EQ(cache.Stats().bad_entries, 1u);
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(FrameCacheTest, ATruncatedEntryIsAMissAndIsRemoved) {
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 64);
  for (size_t keep :
       {size_t{0}, size_t{7}, kHeader, kHeader + key.size(), kHeader + key.size() + 63}) {
    FrameCache cache(dir_, 1 << 20);
    cache.Insert(key, Payload(64, 4));
    const std::string path = DocPath(key);
    ASSERT_TRUE(fs::exists(path));
    fs::resize_file(path, keep);
    std::string got(64, '\0');
    EXPECT_FALSE(cache.Lookup(key, 64, got.data())) << keep;
    EXPECT_EQ(cache.Stats().bad_entries, 1u) << keep;
    EXPECT_FALSE(fs::exists(path)) << keep;
  }
}

TEST_F(FrameCacheTest, ABadMagicALongerFileAndAWrongLengthAreMisses) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 16);
  const std::string path = DocPath(key);
  std::string got(32, '\0');

  cache.Insert(key, Payload(16, 5));
  std::string bytes = ReadBytes(path);
  bytes[7] = '2';  // SLCACHE2
  WriteBytes(path, bytes);
  EXPECT_FALSE(cache.Lookup(key, 16, got.data()));
  EXPECT_FALSE(fs::exists(path));

  cache.Insert(key, Payload(16, 5));
  WriteBytes(path, ReadBytes(path) + "x");  // a byte past the payload
  EXPECT_FALSE(cache.Lookup(key, 16, got.data()));
  EXPECT_FALSE(fs::exists(path));

  cache.Insert(key, Payload(16, 5));
  EXPECT_FALSE(cache.Lookup(key, 17, got.data()));  // not the length the entry holds
  EXPECT_EQ(cache.Stats().bad_entries, 3u);
  EXPECT_EQ(cache.Stats().hits, 0u);
}

TEST_F(FrameCacheTest, AnotherKeysEntryAtTheSamePathIsABadEntry) {
  // What a hash collision would look like: the stored key text is compared byte for byte.
  FrameCache cache(dir_, 1 << 20);
  const std::string a = FrameCache::Key("s3://b/a", "\"e\"", 0, 8);
  const std::string b = FrameCache::Key("s3://b/b", "\"e\"", 0, 8);
  ASSERT_EQ(a.size(), b.size());
  cache.Insert(a, "aaaaaaaa");
  fs::create_directories(fs::path(DocPath(b)).parent_path());
  fs::copy_file(DocPath(a), DocPath(b));
  std::string got(8, '\0');
  EXPECT_FALSE(cache.Lookup(b, 8, got.data()));
  EXPECT_EQ(cache.Stats().bad_entries, 1u);
  EXPECT_FALSE(fs::exists(DocPath(b)));
  ASSERT_TRUE(cache.Lookup(a, 8, got.data()));
  EXPECT_EQ(got, "aaaaaaaa");
}

TEST_F(FrameCacheTest, AHitMakesTheEntryRecentlyModified) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 8);
  cache.Insert(key, "12345678");
  SetMtime(DocPath(key), 946684800);  // 2000-01-01
  std::string got(8, '\0');
  ASSERT_TRUE(cache.Lookup(key, 8, got.data()));
  EXPECT_GT(Mtime(DocPath(key)), ::time(nullptr) - 3600);
}

TEST_F(FrameCacheTest, EvictionKeepsTheBoundAndTheMostRecentlyUsed) {
  // Six entries of one size S; the bound holds 3.5 of them, so each eviction (down to 90% of
  // the bound) removes the single least recently used. The order of use is set with explicit
  // modification times (a clock tick apart would tie on a fast machine).
  auto key = [](int i) {
    return FrameCache::Key(absl::StrCat("s3://b/obj-", i), "\"e\"", 0, 1000);
  };
  const uint64_t entry = kHeader + key(0).size() + 1000;
  const uint64_t bound = 3 * entry + entry / 2;
  FrameCache cache(dir_, bound);
  const time_t base = ::time(nullptr) - 10000;
  int tick = 0;
  auto used = [&](int i) { SetMtime(DocPath(key(i)), base + ++tick); };
  std::string got(1000, '\0');

  for (int i = 0; i < 3; ++i) {
    cache.Insert(key(i), Payload(1000, i));
    used(i);
  }
  EXPECT_EQ(cache.Stats().evicted, 0u);
  ASSERT_TRUE(cache.Lookup(key(0), 1000, got.data()));  // 0 is now more recent than 1 and 2
  used(0);
  cache.Insert(key(3), Payload(1000, 3));  // evicts 1
  used(3);
  cache.Insert(key(4), Payload(1000, 4));  // evicts 2
  used(4);
  ASSERT_TRUE(cache.Lookup(key(0), 1000, got.data()));  // 0 again, after 3 and 4
  used(0);
  cache.Insert(key(5), Payload(1000, 5));  // evicts 3

  for (int i : {0, 4, 5}) {
    EXPECT_TRUE(cache.Contains(key(i))) << i;
    ASSERT_TRUE(cache.Lookup(key(i), 1000, got.data())) << i;
    EXPECT_EQ(got, Payload(1000, i)) << i;
  }
  for (int i : {1, 2, 3}) EXPECT_FALSE(cache.Contains(key(i))) << i;
  uint64_t total = 0;
  EXPECT_EQ(Files(&total).size(), 3u);
  EXPECT_LE(total, bound);
  EXPECT_EQ(total, 3 * entry);
  EXPECT_EQ(cache.Stats().evicted, 3u);
  EXPECT_EQ(cache.Stats().inserted, 6u);
}

TEST_F(FrameCacheTest, OpeningWithASmallerBoundTrimsWhatAnEarlierRunLeft) {
  auto key = [](int i) { return FrameCache::Key(absl::StrCat("s3://b/obj-", i), "\"e\"", 0, 500); };
  const uint64_t entry = kHeader + key(0).size() + 500;
  const time_t base = ::time(nullptr) - 10000;
  {
    FrameCache big(dir_, 1 << 20);
    for (int i = 0; i < 6; ++i) {
      big.Insert(key(i), Payload(500, i));
      SetMtime(DocPath(key(i)), base + i);
    }
  }
  uint64_t total = 0;
  ASSERT_EQ(Files(&total).size(), 6u);
  const uint64_t bound = 2 * entry + entry / 2;  // 90%: room for 2
  FrameCache small(dir_, bound);
  EXPECT_EQ(Files(&total).size(), 2u);
  EXPECT_LE(total, bound);
  EXPECT_TRUE(small.Contains(key(4)));
  EXPECT_TRUE(small.Contains(key(5)));
  EXPECT_EQ(small.Stats().evicted, 4u);
}

TEST_F(FrameCacheTest, ACacheDirUnderARegularFileTurnsWritesOffAndLookupsStillMiss) {
  const std::string file = dir_ + "/not-a-dir";
  WriteBytes(file, "x");
  FrameCache cache(file + "/cache", 1 << 20);  // root() is under a regular file
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 4);

  ::testing::internal::CaptureStderr();
  cache.Insert(key, "abcd");
  cache.Insert(FrameCache::Key("s3://b/k", "\"e\"", 4, 4), "efgh");
  const std::string err = ::testing::internal::GetCapturedStderr();

  const CacheStats s = cache.Stats();
  EXPECT_TRUE(s.writes_off);
  EXPECT_THAT(s.writes_off_why, HasSubstr(file));
  EXPECT_EQ(s.inserted, 0u);
  // Said once, for the first failure.
  EXPECT_THAT(err, HasSubstr("stops writing"));
  EXPECT_EQ(err.find("stops writing"), err.rfind("stops writing")) << err;

  std::string got(4, '\0');
  EXPECT_FALSE(cache.Contains(key));
  EXPECT_FALSE(cache.Lookup(key, 4, got.data()));
  EXPECT_EQ(cache.Stats().misses, 1u);
  EXPECT_EQ(cache.Stats().bad_entries, 0u);
  EXPECT_EQ(ReadBytes(file), "x");

  // ResetStats keeps the cache's writes off (and says why).
  cache.ResetStats();
  EXPECT_TRUE(cache.Stats().writes_off);
  EXPECT_FALSE(cache.Stats().writes_off_why.empty());
  EXPECT_EQ(cache.Stats().misses, 0u);
}

TEST_F(FrameCacheTest, AFailedRenameTurnsWritesOffAndLeavesNoTemporary) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key("s3://b/k", "\"e\"", 0, 4);
  fs::create_directories(DocPath(key) + "/occupied");  // a non-empty folder where the entry goes
  ::testing::internal::CaptureStderr();
  cache.Insert(key, "abcd");
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(cache.Stats().writes_off);
  EXPECT_THAT(cache.Stats().writes_off_why, HasSubstr("rename"));
  for (const auto& e : fs::directory_iterator(fs::path(DocPath(key)).parent_path())) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  // Later inserts of other keys write nothing.
  const std::string other = FrameCache::Key("s3://b/k", "\"e\"", 4, 4);
  cache.Insert(other, "efgh");
  EXPECT_FALSE(cache.Contains(other));
}

TEST_F(FrameCacheTest, AnOverlongKeyIsNotCached) {
  FrameCache cache(dir_, 1 << 20);
  const std::string key = FrameCache::Key(std::string(9000, 'p'), "\"e\"", 0, 4);
  cache.Insert(key, "abcd");
  EXPECT_FALSE(cache.Contains(key));
  EXPECT_FALSE(cache.Stats().writes_off);
  EXPECT_TRUE(Files().empty());
}

TEST_F(FrameCacheTest, TwoCachesOnOneDirectorySeeEachOthersEntries) {
  FrameCache a(dir_, 1 << 20);
  FrameCache b(dir_, 1 << 20);
  const std::string ka = FrameCache::Key("s3://b/k", "\"e\"", 0, 100);
  const std::string kb = FrameCache::Key("s3://b/k", "\"e\"", 100, 100);
  a.Insert(ka, Payload(100, 1));
  b.Insert(kb, Payload(100, 2));
  std::string got(100, '\0');
  EXPECT_TRUE(b.Contains(ka));
  ASSERT_TRUE(b.Lookup(ka, 100, got.data()));
  EXPECT_EQ(got, Payload(100, 1));
  EXPECT_TRUE(a.Contains(kb));
  ASSERT_TRUE(a.Lookup(kb, 100, got.data()));
  EXPECT_EQ(got, Payload(100, 2));
  // A third opened later counts both.
  FrameCache c(dir_, 1 << 20);
  ASSERT_TRUE(c.Lookup(ka, 100, got.data()));
  ASSERT_TRUE(c.Lookup(kb, 100, got.data()));
}

TEST_F(FrameCacheTest, ConcurrentInsertsAndLookupsReturnOnlyTheRightBytes) {
  // Small bound: entries are evicted while other threads read them.
  FrameCache cache(dir_, 20 * (kHeader + 40 + 256));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string got(256, '\0');
      for (int i = 0; i < 60; ++i) {
        const int k = (i * 7 + t) % 30;
        const std::string key = FrameCache::Key("s3://b/k", "\"e\"", k * 256, 256);
        if (cache.Lookup(key, 256, got.data())) {
          if (got != Payload(256, k)) wrong.fetch_add(1);
        } else {
          cache.Insert(key, Payload(256, k));
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  // (writes_off is not asserted here: see ConcurrentWritersNearTheBoundKeepWritesOn.)
  EXPECT_EQ(cache.Stats().bad_entries, 0u);
  uint64_t total = 0;
  Files(&total);
  EXPECT_LE(total, cache.max_bytes());
}

// Several writers on one directory near its bound: each writer's eviction lists every regular
// file, the other writers' temporaries (XX/KEYHASH.slc.tmp.PID.N) included, and may remove one
// (all are about as recent: the file system's clock ticks in milliseconds); that writer's
// rename then failed with ENOENT and turned the cache's writes off for the rest of the run.
// Evict() now leaves temporaries alone and takes a file already gone as removed.
TEST_F(FrameCacheTest, ConcurrentWritersNearTheBoundKeepWritesOn) {
  FrameCache cache(dir_, 4 * (kHeader + 40 + 4096));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        cache.Insert(FrameCache::Key("s3://b/k", "\"e\"", (t * 1000 + i) * 4096, 4096),
                     Payload(4096, i));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_FALSE(cache.Stats().writes_off) << cache.Stats().writes_off_why;
}

}  // namespace
}  // namespace sluice::remote
