// HttpClient: every request sluice makes to an object store or a web server, through libcurl
// (docs/storage.md). One process-wide client owns one curl multi handle driven by one I/O
// thread, so connections (and TLS sessions) are reused across requests, and any number of
// requests stay in flight without a thread each. A caller starts a request and waits for it
// (Perform), or starts several and waits later (Start, PendingRequest::Wait): how read-ahead
// keeps requests in flight.
//
// Retries (docs/storage.md, "Retries"): a timeout, a connection refused or reset, an HTTP 5xx
// and a 429 are retried with capped exponential backoff and full jitter (delay uniform in
// [0, min(cap, base x 2^attempt)], at least the server's Retry-After) until the retry budget
// (SLUICE_RETRY_SECONDS, default 120 s, counted from the first attempt) is spent. Everything
// else fails at once: 403 (kPermissionDenied), 404 (kNotFound), 412 If-Match failed
// (kFailedPrecondition: the object changed), another 4xx (kInvalidArgument), a TLS
// verification failure (kUnavailable, naming the CA bundle), a host that does not resolve.
// A stop (SetStopFlag's flag set by SIGINT/SIGTERM) ends every request in flight or waiting to
// retry with kCancelled within the I/O thread's poll interval (50 ms).
//
// Errors name the request by its display path (never a signed URL or a secret) and range:
//   "s3://b/k: GET bytes=0-99: HTTP 404 (NoSuchKey): ..."
// Thread safety: every method is thread safe.
#ifndef SLUICE_STORAGE_REMOTE_HTTP_CLIENT_H_
#define SLUICE_STORAGE_REMOTE_HTTP_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "pipeline/latency_histogram.h"
#include "storage/remote/aws_config.h"

namespace sluice::remote {

struct HttpRequest {
  std::string url;      // the request's URL, already encoded
  std::string display;  // how messages name it (the user's path)
  bool head = false;
  // A range GET of [offset, offset + length): the body must be exactly those bytes (206, or 200
  // for a whole object of that length) and lands in `dest`, which must hold `length` bytes.
  bool range = false;
  uint64_t offset = 0;
  uint64_t length = 0;
  char* dest = nullptr;
  std::string if_match;  // an ETag the object must still have (412 otherwise); empty: none
  // Signed with AWS Signature V4 when set and not anonymous; also gives the CA bundle.
  std::shared_ptr<const AwsConfig> aws;
  std::string ca_bundle;  // PEM CA bundle for HTTPS; empty: the system's
};

struct HttpResponse {
  long status = 0;
  std::string etag;          // the ETag header, quotes included; empty when absent
  uint64_t object_size = 0;  // a 206's Content-Range total, else Content-Length
  std::string body;          // a non-range GET's body (at most 64 MiB)
  int attempts = 0;
  int64_t latency_ns = 0;  // the successful attempt's, first byte to last
};

// A request started by HttpClient::Start.
class PendingRequest {
 public:
  // Blocks until the request finished (after its retries) and returns its outcome.
  absl::StatusOr<HttpResponse> Wait();
  bool done() const;

  // Internal to http_client.cc (its I/O thread's callbacks).
  struct Transfer;
  void Complete(absl::StatusOr<HttpResponse> result);
  Transfer* transfer() { return transfer_.get(); }

 private:
  friend class HttpClient;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::StatusOr<HttpResponse> result_ = absl::UnknownError("not finished");
  std::unique_ptr<Transfer> transfer_;
};

// What the client did since the process started (or since ResetStats).
struct HttpStats {
  uint64_t requests = 0;  // attempts sent, retries included
  uint64_t succeeded = 0;
  uint64_t retries = 0;            // attempts after a retryable failure
  uint64_t throttled = 0;          // 429 and 503 answers
  uint64_t server_errors = 0;      // other 5xx answers
  uint64_t connection_errors = 0;  // refused, reset, timed out, TLS handshake
  uint64_t failed = 0;             // requests that ended in an error
  uint64_t bytes = 0;              // body bytes received
  int64_t in_flight = 0;
  int64_t max_in_flight = 0;
  // The mean number of requests in flight since the stats began (time-weighted): by Little's
  // law, what a latency-bound reader's rate follows.
  double mean_in_flight = 0;
  // Internal: the integral of in_flight over time (request-ns) and the steady-clock ns of the
  // stats' start and of the last change of in_flight.
  double in_flight_ns = 0;
  int64_t since_ns = 0;
  int64_t changed_ns = 0;
  // Of the time with at least one request in flight, the share, in [0, 1], during which at least
  // one response body was arriving: near 1, the bytes came as fast as the server or the link
  // let them, and more requests in flight cannot raise the byte rate; near 0, the requests
  // spent their time waiting for a first byte (latency), which more in flight hide. Internal:
  // the time with at least one request in flight (ns), the requests receiving a body now, the
  // integral of "at least one" (ns) and the ns of its last change.
  double receiving_fraction = 0;
  double active_ns = 0;
  int64_t receiving = 0;
  double receiving_ns = 0;
  int64_t receiving_changed_ns = 0;
  LatencyHistogram latency;  // per successful request, send to last byte
};

class HttpClient {
 public:
  static HttpClient& Global();

  std::shared_ptr<PendingRequest> Start(HttpRequest request);
  absl::StatusOr<HttpResponse> Perform(HttpRequest request) {
    return Start(std::move(request))->Wait();
  }
  // The flag whose setting ends every request (sluice-train's SIGINT/SIGTERM flag); null: none.
  // May be called before the client exists (it starts no thread).
  static void SetStopFlag(const std::atomic<bool>* stop);
  HttpStats Stats() const;
  void ResetStats();
  // The retry budget in seconds (SLUICE_RETRY_SECONDS at first use, default 120).
  double retry_budget_s() const { return retry_budget_s_; }

  ~HttpClient();

 private:
  HttpClient();
  void Loop();
  struct State;
  std::unique_ptr<State> state_;
  double retry_budget_s_ = 120;
};

}  // namespace sluice::remote

#endif  // SLUICE_STORAGE_REMOTE_HTTP_CLIENT_H_
