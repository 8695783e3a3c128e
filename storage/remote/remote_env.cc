#include "storage/remote/remote_env.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "storage/remote/aws_config.h"
#include "storage/remote/frame_cache.h"
#include "storage/remote/http_client.h"
#include "storage/remote/url.h"
#include "storage/shard_format.h"

namespace sluice::remote {
namespace {

// The splits an HTTP server (which lists no directory) is probed for.
constexpr const char* kProbedSplits[] = {"train", "test", "val", "validation"};
constexpr char kManifestSuffix[] = ".manifest.json";

struct Globals {
  std::mutex mu;
  RemoteOptions options;                 // guarded by mu
  std::shared_ptr<FrameCache> cache;     // guarded by mu; null: none
  bool cache_made = false;               // guarded by mu
  std::shared_ptr<const AwsConfig> aws;  // guarded by mu; loaded at first S3 use
  std::atomic<int> ahead{0};             // ranges fetched ahead and not yet read
  std::atomic<bool> used{false};
};

Globals& G() {
  static Globals* g = new Globals();
  return *g;
}

std::shared_ptr<FrameCache> Cache() {
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.cache_made) {
    g.cache_made = true;
    if (g.options.cache_bytes > 0) {
      g.cache = std::make_shared<FrameCache>(
          g.options.cache_dir.empty() ? DefaultCacheDir() : g.options.cache_dir,
          g.options.cache_bytes);
    }
  }
  return g.cache;
}

absl::StatusOr<std::shared_ptr<const AwsConfig>> Aws() {
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.aws == nullptr) {
    ASSIGN_OR_RETURN(AwsConfig c, LoadAwsConfig());
    g.aws = std::make_shared<const AwsConfig>(std::move(c));
  }
  return g.aws;
}

// A request template for the object at `path`.
absl::StatusOr<HttpRequest> RequestFor(const std::string& path) {
  ASSIGN_OR_RETURN(ObjectPath o, ParseObjectPath(path));
  HttpRequest r;
  r.display = path;
  if (o.scheme == Scheme::kS3) {
    ASSIGN_OR_RETURN(r.aws, Aws());
    r.url = r.aws->ObjectUrl(o.bucket, o.key);
  } else {
    // The path as given, with bytes a URL may not hold encoded ('%' is kept: a path may be
    // encoded already).
    const absl::string_view scheme = o.scheme == Scheme::kHttps ? "https://" : "http://";
    std::string encoded;
    for (const char c : o.key) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (u <= 0x20 || u >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' ||
          c == '`' || c == '{' || c == '|' || c == '}') {
        encoded += UriEncode(absl::string_view(&c, 1), false);
      } else {
        encoded.push_back(c);
      }
    }
    r.url = absl::StrCat(scheme, o.bucket, "/", encoded);
    r.ca_bundle = HttpsCaBundle();
  }
  G().used.store(true, std::memory_order_relaxed);
  return r;
}

class RemoteFile final : public RandomAccessFile {
 public:
  RemoteFile(std::string path, HttpRequest base, uint64_t size, std::string etag)
      : path_(std::move(path)),
        base_(std::move(base)),
        size_(size),
        etag_(std::move(etag)),
        cache_(etag_.empty() ? nullptr : Cache()),
        checked_by_reader_(absl::EndsWith(path_, kShardSuffix)) {}

  ~RemoteFile() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [range, a] : ahead_) {
      a->request->Wait().IgnoreError();  // its buffer must outlive the transfer
      G().ahead.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    if (offset >= size_) return size_t{0};
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    if (n == 0) return size_t{0};
    std::shared_ptr<Ahead> a;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = ahead_.find({offset, n});
      if (it != ahead_.end()) {
        a = std::move(it->second);
        ahead_.erase(it);
      }
    }
    if (a != nullptr) {
      absl::StatusOr<HttpResponse> got = a->request->Wait();
      G().ahead.fetch_sub(1, std::memory_order_relaxed);
      if (got.ok()) {
        RETURN_IF_ERROR(CheckEtag(*got));
        std::memcpy(scratch, a->bytes.data(), n);
        if (cache_ != nullptr) {
          cache_->NoteMiss();  // fetched ahead because it was not cached
          cache_->Insert(Key(offset, n), a->bytes);
        }
        return n;
      }
      // A read-ahead that failed after its retries fails the read as the read itself would.
      return got.status();
    }
    if (cache_ != nullptr && cache_->Lookup(Key(offset, n), n, scratch, checked_by_reader_)) {
      return n;
    }
    HttpRequest r = RangeRequest(offset, n, scratch);
    ASSIGN_OR_RETURN(HttpResponse got, HttpClient::Global().Perform(std::move(r)));
    RETURN_IF_ERROR(CheckEtag(got));
    if (cache_ != nullptr) cache_->Insert(Key(offset, n), absl::string_view(scratch, n));
    return n;
  }

  void WillRead(uint64_t offset, size_t n) const override {
    if (offset >= size_) return;
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
    if (n == 0) return;
    Globals& g = G();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ahead_.count({offset, n}) != 0) return;
    }
    if (cache_ != nullptr && cache_->Contains(Key(offset, n))) return;
    // Take a slot of the process-wide window, or leave the range to its read.
    int now = g.ahead.load(std::memory_order_relaxed);
    do {
      if (now >= kMaxReadConcurrency) return;
    } while (!g.ahead.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
    auto a = std::make_shared<Ahead>();
    a->bytes.resize(n);
    a->request = HttpClient::Global().Start(RangeRequest(offset, n, a->bytes.data()));
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = ahead_.emplace(std::make_pair(offset, n), a);
    if (!inserted) {  // another thread hinted it meanwhile: this fetch is dropped when done
      a->request->Wait().IgnoreError();
      g.ahead.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  uint64_t Size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  struct Ahead {
    std::string bytes;
    std::shared_ptr<PendingRequest> request;
  };

  HttpRequest RangeRequest(uint64_t offset, size_t n, char* dest) const {
    HttpRequest r = base_;
    r.range = true;
    r.offset = offset;
    r.length = n;
    r.dest = dest;
    r.if_match = etag_;
    return r;
  }

  std::string Key(uint64_t offset, size_t n) const {
    return FrameCache::Key(path_, etag_, offset, n);
  }

  absl::Status CheckEtag(const HttpResponse& got) const {
    if (etag_.empty() || got.etag.empty() || got.etag == etag_) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        path_, ": the object changed while it was read (ETag ", got.etag, ", opened as ", etag_,
        "): the dataset was replaced during the run; start again"));
  }

  std::string path_;
  HttpRequest base_;
  uint64_t size_;
  std::string etag_;
  std::shared_ptr<FrameCache> cache_;
  // A shard: every range a reader takes from it is checked by its own XXH3 (a frame's, or the
  // manifest's meta_xxh3 for the header and index), so a cache entry this process already
  // checked need not be hashed again. Images, IDX and record files have no checksum: each
  // cache read of theirs is hashed.
  bool checked_by_reader_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<uint64_t, size_t>, std::shared_ptr<Ahead>> ahead_;
};

absl::Status ReadOnly(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": cannot ", what,
      ": sluice reads object storage but never writes it; write the dataset to a local directory "
      "and upload it with your client (aws s3 cp --recursive DIR s3://BUCKET/PREFIX)"));
}

// Decodes the five XML entities S3 escapes in keys.
std::string XmlText(absl::string_view s) {
  return absl::StrReplaceAll(
      s, {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}});
}

std::vector<std::string> XmlValues(absl::string_view xml, absl::string_view tag) {
  std::vector<std::string> out;
  const std::string open = absl::StrCat("<", tag, ">"), close = absl::StrCat("</", tag, ">");
  size_t at = 0;
  while ((at = xml.find(open, at)) != absl::string_view::npos) {
    const size_t start = at + open.size();
    const size_t end = xml.find(close, start);
    if (end == absl::string_view::npos) break;
    out.push_back(XmlText(xml.substr(start, end - start)));
    at = end + close.size();
  }
  return out;
}

class RoutingEnv final : public Env {
 public:
  explicit RoutingEnv(Env* base) : base_(base) {}

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    if (!IsRemotePath(path)) return base_->NewRandomAccessFile(path);
    ASSIGN_OR_RETURN(HttpRequest base, RequestFor(path));
    HttpRequest head = base;
    head.head = true;
    ASSIGN_OR_RETURN(HttpResponse got, HttpClient::Global().Perform(std::move(head)));
    return std::unique_ptr<RandomAccessFile>(
        new RemoteFile(path, std::move(base), got.object_size, got.etag));
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    if (IsRemotePath(path)) return ReadOnly(path, "write");
    return base_->NewWritableFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewTemporaryFile(const std::string& path) override {
    if (IsRemotePath(path)) return ReadOnly(path, "write");
    return base_->NewTemporaryFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    if (IsRemotePath(path)) return ReadOnly(path, "write");
    return base_->NewAppendableFile(path);
  }
  bool IsSpecialFile(const std::string& path) override {
    return !IsRemotePath(path) && base_->IsSpecialFile(path);
  }
  bool FileExists(const std::string& path) override {
    if (!IsRemotePath(path)) return base_->FileExists(path);
    if (Head(path).ok()) return true;
    auto children = GetChildren(path);  // a prefix (a "directory") with objects under it
    return children.ok() && !children->empty();
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    if (!IsRemotePath(path)) return base_->GetFileSize(path);
    ASSIGN_OR_RETURN(HttpResponse got, Head(path));
    return got.object_size;
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    if (!IsRemotePath(dir)) return base_->GetChildren(dir);
    ASSIGN_OR_RETURN(ObjectPath o, ParseObjectPath(dir));
    if (o.scheme == Scheme::kS3) return ListS3(dir, o);
    // An HTTP server lists nothing: the splits' manifests are looked for by name.
    std::vector<std::string> found;
    for (const char* split : kProbedSplits) {
      const std::string name = absl::StrCat(split, kManifestSuffix);
      if (Head(JoinPath(dir, name)).ok()) found.push_back(name);
    }
    if (found.empty()) {
      return absl::NotFoundError(absl::StrCat(
          dir, ": an HTTP server lists no directory, and none of ",
          absl::StrJoin(
              kProbedSplits, ", ",
              [](std::string* out, const char* s) { absl::StrAppend(out, s, kManifestSuffix); }),
          " is there; name the manifest file (", JoinPath(dir, "SPLIT.manifest.json"), ")"));
    }
    return found;
  }
  absl::Status CreateDirs(const std::string& dir) override {
    if (IsRemotePath(dir)) return ReadOnly(dir, "create a directory");
    return base_->CreateDirs(dir);
  }
  absl::Status DeleteFile(const std::string& path) override {
    if (IsRemotePath(path)) return ReadOnly(path, "delete");
    return base_->DeleteFile(path);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (IsRemotePath(from)) return ReadOnly(from, "rename");
    if (IsRemotePath(to)) return ReadOnly(to, "rename");
    return base_->RenameFile(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override {
    if (IsRemotePath(dir)) return ReadOnly(dir, "sync");
    return base_->SyncDir(dir);
  }
  absl::StatusOr<std::unique_ptr<LockedFile>> LockFile(const std::string& path) override {
    if (IsRemotePath(path)) return ReadOnly(path, "lock");
    return base_->LockFile(path);
  }

 private:
  absl::StatusOr<HttpResponse> Head(const std::string& path) {
    ASSIGN_OR_RETURN(HttpRequest r, RequestFor(path));
    r.head = true;
    return HttpClient::Global().Perform(std::move(r));
  }

  // ListObjectsV2 with delimiter '/': the names (objects and common prefixes) under `dir`.
  absl::StatusOr<std::vector<std::string>> ListS3(const std::string& dir, const ObjectPath& o) {
    ASSIGN_OR_RETURN(HttpRequest base, RequestFor(dir));
    const std::string prefix = o.key.empty() ? "" : absl::StrCat(o.key, "/");
    std::vector<std::string> names;
    std::string token;
    for (int page = 0; page < 100000; ++page) {
      // The query is built canonical (sorted, encoded) here: libcurl 7.88 signs it as given.
      std::vector<std::string> query;
      if (!token.empty()) {
        query.push_back(absl::StrCat("continuation-token=", UriEncode(token, false)));
      }
      query.push_back("delimiter=%2F");
      query.push_back("list-type=2");
      query.push_back(absl::StrCat("prefix=", UriEncode(prefix, false)));
      HttpRequest r = base;
      r.url = absl::StrCat(base.aws->ObjectUrl(o.bucket, ""), "?", absl::StrJoin(query, "&"));
      r.display = absl::StrCat(dir, " (list)");
      ASSIGN_OR_RETURN(HttpResponse got, HttpClient::Global().Perform(std::move(r)));
      for (const std::string& key : XmlValues(got.body, "Key")) {
        if (absl::StartsWith(key, prefix) && key.size() > prefix.size()) {
          names.push_back(key.substr(prefix.size()));
        }
      }
      for (const std::string& p : XmlValues(got.body, "Prefix")) {
        if (absl::StartsWith(p, prefix) && p.size() > prefix.size() + 1 && p.back() == '/') {
          names.push_back(p.substr(prefix.size(), p.size() - prefix.size() - 1));
        }
      }
      const std::vector<std::string> truncated = XmlValues(got.body, "IsTruncated");
      const std::vector<std::string> next = XmlValues(got.body, "NextContinuationToken");
      if (truncated.empty() || truncated[0] != "true" || next.empty()) break;
      token = next[0];
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    if (names.empty()) {
      return absl::NotFoundError(absl::StrCat(dir, ": no objects under this prefix"));
    }
    return names;
  }

  Env* base_;
};

}  // namespace

absl::StatusOr<uint64_t> ParseByteCount(absl::string_view text) {
  absl::string_view digits = text;
  int shift = 0;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift != 0) digits.remove_suffix(1);
  }
  uint64_t v = 0;
  // Digits only: SimpleAtoi would take a sign and white space.
  const bool digits_only = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
  if (!digits_only || !absl::SimpleAtoi(digits, &v) ||
      (shift != 0 && v > (~uint64_t{0} >> shift))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\": expected a byte count, optionally with K, M, G or T (e.g. 16G)"));
  }
  return v << shift;
}

void ConfigureRemote(const RemoteOptions& options) {
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.options.cache_dir != options.cache_dir || g.options.cache_bytes != options.cache_bytes) {
    g.cache.reset();
    g.cache_made = false;
  }
  g.options = options;
}

RemoteOptions CurrentRemoteOptions() {
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.options;
}

Env* UrlEnv() {
  static Env* env = new RoutingEnv(Env::Default());
  return env;
}

RemoteReadStats CollectRemoteStats() {
  RemoteReadStats s;
  s.used = G().used.load(std::memory_order_relaxed);
  const HttpStats h = HttpClient::Global().Stats();
  s.requests = h.requests;
  s.retries = h.retries;
  s.throttled = h.throttled;
  s.server_errors = h.server_errors;
  s.connection_errors = h.connection_errors;
  s.failed = h.failed;
  s.bytes = h.bytes;
  s.max_in_flight = h.max_in_flight;
  s.mean_in_flight = h.mean_in_flight;
  s.receiving_fraction = h.receiving_fraction;
  s.latency = h.latency.Summary();
  Globals& g = G();
  std::shared_ptr<FrameCache> cache;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    cache = g.cache;
  }
  if (cache != nullptr) {
    const CacheStats c = cache->Stats();
    s.cache_on = true;
    s.cache_hits = c.hits;
    s.cache_misses = c.misses;
    s.cache_hit_bytes = c.hit_bytes;
    s.cache_evicted = c.evicted;
    s.cache_writes_off = c.writes_off;
    s.cache_writes_off_why = c.writes_off_why;
  }
  return s;
}

void ResetRemoteStats() {
  HttpClient::Global().ResetStats();
  Globals& g = G();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.cache != nullptr) g.cache->ResetStats();
}

}  // namespace sluice::remote
