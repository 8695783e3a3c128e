// Datasets in object storage (docs/storage.md): an Env whose paths may be URLs.
//
// UrlEnv() is the Env that sluice-train, sluice-shard inspect/verify and the Python package
// read datasets through: a path starting with s3://, https:// or http:// names an object in a
// store, and any other path goes to Env::Default(). A remote file is opened with one HEAD (its
// size and ETag); each Read is one HTTP range GET, sent with If-Match: ETAG, so a dataset
// replaced while a run reads it is refused (kFailedPrecondition), never mixed. WillRead starts
// the GET of a range the reader is about to want (read-ahead). The pipeline hints the next
// PipelineResources::read_concurrency frames of its order (--read-concurrency), so that many
// requests stay in flight and memory stays bounded by that many frames whatever the latency;
// the ranges fetched ahead and not yet read never exceed kMaxReadConcurrency in the process
// (a range hinted past that is fetched when it is read).
//
// Writing, deleting, renaming and locking a remote path is refused (kInvalidArgument): sluice
// reads object storage and writes local files; datasets are uploaded with the user's client.
//
// Thread safety: thread safe.
#ifndef SLUICE_STORAGE_REMOTE_REMOTE_ENV_H_
#define SLUICE_STORAGE_REMOTE_REMOTE_ENV_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "pipeline/latency_histogram.h"

namespace sluice::remote {

inline constexpr int kMaxReadConcurrency = 256;
inline constexpr uint64_t kDefaultCacheBytes = uint64_t{16} << 30;

struct RemoteOptions {
  // The local cache of fetched ranges (docs/formats/remote-cache.md): its directory (empty:
  // DefaultCacheDir()) and its bound in bytes (0: no cache).
  std::string cache_dir;
  uint64_t cache_bytes = kDefaultCacheBytes;
};

// "16G", "512M", "1048576", "0": a byte count with an optional K/M/G/T suffix (powers of 1024).
// kInvalidArgument naming the text otherwise.
absl::StatusOr<uint64_t> ParseByteCount(absl::string_view text);

// Sets the options of every remote read from now on (files opened earlier keep their cache).
void ConfigureRemote(const RemoteOptions& options);
RemoteOptions CurrentRemoteOptions();

// The process-wide Env that reads URLs. Never deleted.
Env* UrlEnv();

// What remote reads did since the process started or since ResetRemoteStats(): the read
// stage's network view in the report.
struct RemoteReadStats {
  bool used = false;      // any remote file was opened
  uint64_t requests = 0;  // HTTP attempts, retries included
  uint64_t retries = 0;
  uint64_t throttled = 0;  // 429 / 503 answers
  uint64_t server_errors = 0;
  uint64_t connection_errors = 0;
  uint64_t failed = 0;
  uint64_t bytes = 0;  // bytes received from servers
  int64_t max_in_flight = 0;
  double mean_in_flight = 0;  // time-weighted, since the stats began
  // Of the time with a request in flight, the share with a response body arriving, in [0, 1]
  // (HttpStats).
  double receiving_fraction = 0;
  LatencySummary latency;  // per successful request
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_hit_bytes = 0;
  uint64_t cache_evicted = 0;
  bool cache_on = false;
  bool cache_writes_off = false;
  std::string cache_writes_off_why;
};
RemoteReadStats CollectRemoteStats();
void ResetRemoteStats();

}  // namespace sluice::remote

#endif  // SLUICE_STORAGE_REMOTE_REMOTE_ENV_H_
