#include "storage/remote/frame_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/coding.h"
#include "xxhash.h"

namespace sluice::remote {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'C', 'A', 'C', 'H', 'E', '1'};
constexpr size_t kHeaderBytes = 32;
constexpr size_t kMaxKeyBytes = 8192;

bool MakeDirs(const std::string& dir) {
  if (dir.empty()) return true;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !MakeDirs(dir.substr(0, slash))) return false;
  return ::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

FrameCache::FrameCache(std::string dir, uint64_t max_bytes)
    : root_(absl::StrCat(dir, "/remote/v1")), max_bytes_(max_bytes) {
  Evict();  // counts what earlier runs left (and trims it to a smaller bound)
}

std::string FrameCache::Key(absl::string_view path, absl::string_view etag, uint64_t offset,
                            uint64_t length) {
  return absl::StrCat(path, "\n", etag, "\n", offset, "\n", length, "\n");
}

FrameCache::Hash FrameCache::KeyHash(const std::string& key) {
  const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
  return {h.high64, h.low64};
}

std::string FrameCache::EntryPath(const Hash& h) const {
  const std::string hex = absl::StrFormat("%016x%016x", h.first, h.second);
  return absl::StrCat(root_, "/", hex.substr(0, 2), "/", hex, ".slc");
}

bool FrameCache::Known(const Hash& h) const {
  std::lock_guard<std::mutex> lock(known_mu_);
  return known_.contains(h);
}

void FrameCache::SetKnown(const Hash& h, bool known) {
  std::lock_guard<std::mutex> lock(known_mu_);
  if (!known) {
    known_.erase(h);
  } else if (known_.size() < kMaxKnown) {
    known_.insert(h);
  }
}

bool FrameCache::Contains(const std::string& key) const {
  const Hash h = KeyHash(key);
  if (Known(h)) return true;
  struct stat st;
  return ::stat(EntryPath(h).c_str(), &st) == 0;
}

bool FrameCache::Lookup(const std::string& key, uint64_t length, char* dest, bool trust_known) {
  const Hash h = KeyHash(key);
  const std::string path = EntryPath(h);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (Known(h)) {
      // Another process evicted it, and with it about a tenth of the cache: forget everything
      // known, or read-ahead would skip each evicted range and its read would wait for it.
      std::lock_guard<std::mutex> lock(known_mu_);
      known_.clear();
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.misses;
    return false;
  }
  bool ok = false;
  char header[kHeaderBytes];
  struct stat st;
  // The entry as the key says it must be, in one read: header, key, payload (a file of any
  // other size fails the size check).
  std::string stored_key(key.size(), '\0');
  iovec parts[3] = {{header, kHeaderBytes},
                    {stored_key.data(), stored_key.size()},
                    {dest, static_cast<size_t>(length)}};
  const size_t want = kHeaderBytes + key.size() + length;
  if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == want &&
      ::readv(fd, parts, 3) == static_cast<ssize_t>(want) && std::memcmp(header, kMagic, 8) == 0 &&
      DecodeFixed32(header + 8) == key.size() && DecodeFixed64(header + 16) == length &&
      stored_key == key) {
    // Entries are immutable once renamed, and one this process wrote or checked was whole
    // then: hashing it again on every epoch cost the warm cache 3% of a 2-core machine.
    ok = (trust_known && Known(h)) || XXH3_64bits(dest, length) == DecodeFixed64(header + 24);
  }
  ::close(fd);
  SetKnown(h, ok);
  std::lock_guard<std::mutex> lock(mu_);
  if (!ok) {
    ++stats_.bad_entries;
    ++stats_.misses;
    ::unlink(path.c_str());
    return false;
  }
  // Now: recently used. Once a minute at most per entry (a syscall and an inode write per frame
  // read cost the warm cache 10% of its rate); eviction's order needs no finer grain.
  if (st.st_mtim.tv_sec + 60 < ::time(nullptr)) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  ++stats_.hits;
  stats_.hit_bytes += length;
  return true;
}

void FrameCache::TurnWritesOff(const std::string& why) {
  if (writes_off_.exchange(true)) return;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.writes_off = true;
  stats_.writes_off_why = why;
  std::fprintf(stderr, "sluice: the remote read cache stops writing for this run: %s\n",
               why.c_str());
}

void FrameCache::Insert(const std::string& key, absl::string_view payload) {
  if (writes_off_.load(std::memory_order_relaxed) || key.size() > kMaxKeyBytes) return;
  const Hash h = KeyHash(key);
  const std::string path = EntryPath(h);
  const std::string dir = path.substr(0, path.find_last_of('/'));
  if (!MakeDirs(dir)) {
    TurnWritesOff(absl::StrCat(dir, ": cannot be created: ", std::strerror(errno)));
    return;
  }
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", tmp_counter_.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    TurnWritesOff(absl::StrCat(tmp, ": cannot be created: ", std::strerror(errno)));
    return;
  }
  char header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  EncodeFixed32(header + 8, static_cast<uint32_t>(key.size()));
  EncodeFixed64(header + 16, payload.size());
  EncodeFixed64(header + 24, XXH3_64bits(payload.data(), payload.size()));
  const bool written = WriteAll(fd, header, kHeaderBytes) && WriteAll(fd, key.data(), key.size()) &&
                       WriteAll(fd, payload.data(), payload.size());
  const int write_errno = errno;
  if (::close(fd) != 0 || !written) {
    ::unlink(tmp.c_str());
    TurnWritesOff(absl::StrCat(tmp, ": write failed: ", std::strerror(write_errno),
                               " (reads go on from the store and from the entries already "
                               "cached)"));
    return;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    ::unlink(tmp.c_str());
    // ENOENT: the directory was emptied under it (another process cleared the cache): this
    // entry is lost, the cache is not broken.
    if (rename_errno != ENOENT) {
      TurnWritesOff(absl::StrCat(path, ": rename failed: ", std::strerror(rename_errno)));
    }
    return;
  }
  SetKnown(h, true);
  const uint64_t bytes = kHeaderBytes + key.size() + payload.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.inserted;
  }
  if (counted_bytes_.fetch_add(bytes) + bytes > max_bytes_) Evict();
}

void FrameCache::Evict() {
  std::lock_guard<std::mutex> lock(mu_);
  struct Entry {
    int64_t mtime_ns;
    uint64_t bytes;
    std::string path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  if (DIR* top = ::opendir(root_.c_str())) {
    while (dirent* d = ::readdir(top)) {
      if (d->d_name[0] == '.') continue;
      const std::string sub = absl::StrCat(root_, "/", d->d_name);
      DIR* inner = ::opendir(sub.c_str());
      if (inner == nullptr) continue;
      while (dirent* e = ::readdir(inner)) {
        // Entries only: another writer's temporary is being written now.
        if (e->d_name[0] == '.' || !absl::EndsWith(e->d_name, ".slc")) continue;
        const std::string p = absl::StrCat(sub, "/", e->d_name);
        struct stat st;
        if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        entries.push_back(
            {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
             static_cast<uint64_t>(st.st_size), p});
        total += static_cast<uint64_t>(st.st_size);
      }
      ::closedir(inner);
    }
    ::closedir(top);
  }
  if (total > max_bytes_) {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
    const uint64_t target = max_bytes_ / 10 * 9;
    for (const Entry& e : entries) {
      if (total <= target) break;
      if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) {
        total -= e.bytes;
        ++stats_.evicted;
      }
    }
    // What this process knew of the removed entries is dropped whole, after the removals (a
    // lookup during them may have marked one known).
    std::lock_guard<std::mutex> known_lock(known_mu_);
    known_.clear();
  }
  counted_bytes_.store(total);
}

void FrameCache::NoteMiss() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.misses;
}

CacheStats FrameCache::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void FrameCache::ResetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool off = stats_.writes_off;
  const std::string why = stats_.writes_off_why;
  stats_ = CacheStats();
  stats_.writes_off = off;
  stats_.writes_off_why = why;
}

}  // namespace sluice::remote
