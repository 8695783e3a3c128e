// FrameCache: byte ranges of remote objects kept on local disk, bounded, least recently used out
// first (docs/formats/remote-cache.md). What makes a second epoch from object storage run at
// local-disk speed.
//
// A miss or a bad entry is never an error: Lookup says false and the caller fetches. Insert
// never fails the run: a write that fails (ENOSPC, EROFS) turns writes off for the process and
// says so once on stderr. Several processes may share one directory.
// Thread safety: thread safe.
#ifndef SLUICE_STORAGE_REMOTE_FRAME_CACHE_H_
#define SLUICE_STORAGE_REMOTE_FRAME_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"

namespace sluice::remote {

struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bad_entries = 0;  // entries found but failing a check (removed, fetched again)
  uint64_t inserted = 0;
  uint64_t evicted = 0;
  uint64_t hit_bytes = 0;
  bool writes_off = false;  // a write failed: the cache only reads for the rest of the run
  std::string writes_off_why;
};

class FrameCache {
 public:
  // `dir`: the cache directory (entries go under dir/remote/v1); `max_bytes` > 0.
  FrameCache(std::string dir, uint64_t max_bytes);

  // The key text of a range (docs/formats/remote-cache.md, "The key").
  static std::string Key(absl::string_view path, absl::string_view etag, uint64_t offset,
                         uint64_t length);
  // Reads the entry of `key` into dest[0, length) when it exists and passes every check. With
  // `trust_known` (the caller checks the bytes itself: a shard's frames carry their XXH3), an
  // entry this process wrote or has already checked is read without hashing its payload again
  // (its size, magic, key and length are still checked; docs/formats/remote-cache.md).
  bool Lookup(const std::string& key, uint64_t length, char* dest, bool trust_known = false);
  // Whether an entry of `key` exists (unchecked): read-ahead skips what is cached. No file
  // system call for an entry this process wrote or checked.
  bool Contains(const std::string& key) const;
  void Insert(const std::string& key, absl::string_view payload);
  // Counts a miss that Lookup did not see: a range fetched ahead (WillRead) without a lookup.
  void NoteMiss();

  CacheStats Stats() const;
  void ResetStats();
  const std::string& root() const { return root_; }
  uint64_t max_bytes() const { return max_bytes_; }

 private:
  using Hash = std::pair<uint64_t, uint64_t>;  // XXH3-128 of the key: the entry's name
  static Hash KeyHash(const std::string& key);
  std::string EntryPath(const Hash& h) const;
  bool Known(const Hash& h) const;
  void SetKnown(const Hash& h, bool known);
  void Evict();
  void TurnWritesOff(const std::string& why);

  std::string root_;
  uint64_t max_bytes_;
  std::atomic<uint64_t> counted_bytes_{0};  // this process's view of the directory's bytes
  std::atomic<uint64_t> tmp_counter_{0};
  mutable std::mutex mu_;  // guards stats_ and eviction
  CacheStats stats_;
  std::atomic<bool> writes_off_{false};
  // Entries this process wrote or checked since its last eviction, or since it found a known
  // entry gone (either forgets them all), at most kMaxKnown: read without rehashing their
  // payload when the caller checks the bytes itself (Lookup's trust_known).
  static constexpr size_t kMaxKnown = size_t{1} << 18;  // about 5 MB; frames of 100 KB: 26 GB
  mutable std::mutex known_mu_;
  absl::flat_hash_set<Hash> known_;
};

}  // namespace sluice::remote

#endif  // SLUICE_STORAGE_REMOTE_FRAME_CACHE_H_
