#include "storage/remote/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sluice::remote {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxBody = size_t{64} << 20;
constexpr size_t kMaxErrorBody = 4096;
constexpr int kPollMs = 50;
constexpr double kBackoffBaseS = 0.1;
constexpr double kBackoffCapS = 5.0;
// The payload hash of an empty body: what libcurl 7.88's Signature V4 puts in the canonical
// request of a GET or HEAD, so the x-amz-content-sha256 header S3 requires must say the same.
constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::atomic<const std::atomic<bool>*> g_stop{nullptr};

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Sets the requests in flight, adding the span since the last change to the integral.
void SetInFlight(HttpStats* s, int64_t n) {
  const int64_t now = SteadyNs();
  s->in_flight_ns += static_cast<double>(s->in_flight) * static_cast<double>(now - s->changed_ns);
  if (s->in_flight > 0) s->active_ns += static_cast<double>(now - s->changed_ns);
  s->changed_ns = now;
  s->in_flight = n;
}

// Sets the requests receiving a body now, adding the span since the last change to the time
// with at least one.
void SetReceiving(HttpStats* s, int64_t n) {
  const int64_t now = SteadyNs();
  if (s->receiving > 0) s->receiving_ns += static_cast<double>(now - s->receiving_changed_ns);
  s->receiving_changed_ns = now;
  s->receiving = n;
}

double RetryBudgetFromEnv() {
  const char* v = std::getenv("SLUICE_RETRY_SECONDS");
  double s = 0;
  if (v != nullptr && absl::SimpleAtod(v, &s) && s >= 0) return s;
  return 120;
}

// "scheme://authority" of a URL.
std::string HostOf(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return url.substr(0, slash);
}

std::string Describe(const HttpRequest& r) {
  if (r.head) return absl::StrCat(r.display, ": HEAD");
  if (r.range) {
    return absl::StrCat(r.display, ": GET bytes=", r.offset, "-", r.offset + r.length - 1);
  }
  return absl::StrCat(r.display, ": GET");
}

// The <Code> and <Message> of an S3 error body, when it has them.
std::string ErrorDetail(const std::string& body) {
  auto tag = [&](absl::string_view name) -> std::string {
    const std::string open = absl::StrCat("<", name, ">");
    const size_t a = body.find(open);
    if (a == std::string::npos) return "";
    const size_t b = body.find(absl::StrCat("</", name, ">"), a);
    if (b == std::string::npos) return "";
    return body.substr(a + open.size(), b - a - open.size());
  };
  const std::string code = tag("Code");
  const std::string message = tag("Message");
  if (code.empty()) return "";
  return message.empty() ? absl::StrCat(" (", code, ")")
                         : absl::StrCat(" (", code, ": ", message, ")");
}

}  // namespace

struct PendingRequest::Transfer {
  HttpRequest request;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  // The response being received (reset at each attempt and each header block).
  long status = 0;
  std::string etag;
  std::string content_range;
  std::string retry_after;
  std::string body;
  uint64_t received = 0;
  bool overflow = false;
  int attempts = 0;
  Clock::time_point first_start;
  Clock::time_point attempt_start;
  Clock::time_point retry_at;

  ~Transfer() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
};

struct HttpClient::State {
  std::mutex mu;
  std::deque<std::shared_ptr<PendingRequest>> submitted;  // guarded by mu
  CURLM* multi = nullptr;
  std::thread thread;
  // I/O thread only:
  std::vector<std::shared_ptr<PendingRequest>> active;
  std::vector<std::shared_ptr<PendingRequest>> waiting;  // to retry at their retry_at
  std::mt19937_64 rng{std::random_device{}()};
  // Hosts ("scheme://authority") whose request failed after the whole retry budget, and when:
  // later requests to them fail at once for one more budget (a run that probes several names
  // of a dead store would otherwise spend the budget once per name); after that they are tried
  // again (a long-lived process, a notebook, outlives a store's outage).
  struct Unreachable {
    absl::Status status;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::string, Unreachable> unreachable;
  // Stats, guarded by stats_mu.
  mutable std::mutex stats_mu;
  HttpStats stats;
};

namespace {

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<PendingRequest::Transfer*>(user);
  absl::string_view line(data, size * n);
  if (absl::StartsWith(line, "HTTP/")) {  // a new response (after a 100 or a redirect)
    t->etag.clear();
    t->content_range.clear();
    t->retry_after.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return size * n;
  const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  const std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  if (name == "etag") t->etag = value;
  if (name == "content-range") t->content_range = value;
  if (name == "retry-after") t->retry_after = value;
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<PendingRequest::Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  const HttpRequest& r = t->request;
  if (status >= 200 && status < 300 && r.range) {
    if (t->received + bytes > r.length) {
      t->overflow = true;
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    std::memcpy(r.dest + t->received, data, bytes);
  } else {
    const size_t cap = status >= 200 && status < 300 ? kMaxBody : kMaxErrorBody;
    if (t->body.size() + bytes > cap) {
      if (status >= 200 && status < 300) {
        t->overflow = true;
        return 0;
      }
      t->body.append(data, cap - t->body.size());
    } else {
      t->body.append(data, bytes);
    }
  }
  t->received += bytes;
  return bytes;
}

}  // namespace

absl::StatusOr<HttpResponse> PendingRequest::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  return result_;
}

void PendingRequest::Complete(absl::StatusOr<HttpResponse> result) {
  std::lock_guard<std::mutex> lock(mu_);
  result_ = std::move(result);
  done_ = true;
  cv_.notify_all();
}

bool PendingRequest::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void HttpClient::SetStopFlag(const std::atomic<bool>* stop) { g_stop.store(stop); }

HttpClient& HttpClient::Global() {
  static HttpClient* client = new HttpClient();  // never deleted: its thread serves to the end
  return *client;
}

HttpClient::HttpClient() : state_(std::make_unique<State>()) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  retry_budget_s_ = RetryBudgetFromEnv();
  state_->stats.since_ns = state_->stats.changed_ns = state_->stats.receiving_changed_ns =
      SteadyNs();
  state_->multi = curl_multi_init();
  curl_multi_setopt(state_->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 256L);
  curl_multi_setopt(state_->multi, CURLMOPT_MAXCONNECTS, 256L);
  state_->thread = std::thread([this] { Loop(); });
  state_->thread.detach();
}

HttpClient::~HttpClient() = default;

std::shared_ptr<PendingRequest> HttpClient::Start(HttpRequest request) {
  auto p = std::make_shared<PendingRequest>();
  p->transfer_ = std::make_unique<PendingRequest::Transfer>();
  p->transfer()->request = std::move(request);
  p->transfer()->first_start = Clock::now();
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->submitted.push_back(p);
  }
  curl_multi_wakeup(state_->multi);
  return p;
}

HttpStats HttpClient::Stats() const {
  HttpStats s;
  {
    std::lock_guard<std::mutex> lock(state_->stats_mu);
    s = state_->stats;
  }
  SetInFlight(&s, s.in_flight);  // the integrals up to now
  SetReceiving(&s, s.receiving);
  const int64_t span = s.changed_ns - s.since_ns;
  s.mean_in_flight = span > 0 ? s.in_flight_ns / static_cast<double>(span) : 0;
  s.receiving_fraction = s.active_ns > 0 ? std::clamp(s.receiving_ns / s.active_ns, 0.0, 1.0) : 0;
  return s;
}

void HttpClient::ResetStats() {
  std::lock_guard<std::mutex> lock(state_->stats_mu);
  const int64_t in_flight = state_->stats.in_flight;
  const int64_t receiving = state_->stats.receiving;
  state_->stats = HttpStats();
  state_->stats.in_flight = in_flight;
  state_->stats.max_in_flight = in_flight;
  state_->stats.receiving = receiving;
  state_->stats.since_ns = state_->stats.changed_ns = state_->stats.receiving_changed_ns =
      SteadyNs();
}

namespace {

void Finish(const std::shared_ptr<PendingRequest>& p, absl::StatusOr<HttpResponse> result) {
  p->Complete(std::move(result));
}

// Sets up `t`'s easy handle for its next attempt.
void Prepare(PendingRequest::Transfer* t) {
  const HttpRequest& r = t->request;
  if (t->easy == nullptr) t->easy = curl_easy_init();
  CURL* e = t->easy;
  curl_easy_reset(e);
  curl_slist_free_all(t->headers);
  t->headers = nullptr;
  t->status = 0;
  t->etag.clear();
  t->content_range.clear();
  t->retry_after.clear();
  t->body.clear();
  t->received = 0;
  t->overflow = false;
  t->error[0] = '\0';
  curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  // A stalled transfer (under 1 KB/s for 30 s) is a timeout, retried.
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 30L);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, nullptr);  // bytes as stored, never re-encoded
  curl_easy_setopt(e, CURLOPT_USERAGENT, "sluice/1 (libcurl)");
  if (r.head) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  const std::string& ca = r.aws && !r.aws->ca_bundle.empty() ? r.aws->ca_bundle : r.ca_bundle;
  if (!ca.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, ca.c_str());
  if (r.range) {
    t->headers = curl_slist_append(
        t->headers, absl::StrCat("Range: bytes=", r.offset, "-", r.offset + r.length - 1).c_str());
  }
  if (!r.if_match.empty()) {
    t->headers = curl_slist_append(t->headers, absl::StrCat("If-Match: ", r.if_match).c_str());
  }
  if (r.aws && !r.aws->anonymous()) {
    // libcurl signs (CURLOPT_AWS_SIGV4); the key and the secret go separately, since either
    // may hold a ':'. S3 wants the payload's hash in a header of its own (curl 8.0 adds it).
    const std::string sigv4 = absl::StrCat("aws:amz:", r.aws->region, ":s3");
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, r.aws->access_key.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, r.aws->secret_key.c_str());
    t->headers =
        curl_slist_append(t->headers, absl::StrCat("x-amz-content-sha256: ", kEmptySha256).c_str());
    if (!r.aws->session_token.empty()) {
      t->headers = curl_slist_append(
          t->headers, absl::StrCat("x-amz-security-token: ", r.aws->session_token).c_str());
    }
  }
  if (t->headers != nullptr) curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
}

enum class Outcome { kDone, kRetry, kFail };

struct Verdict {
  Outcome outcome;
  absl::Status status;  // kFail and kRetry: why
  enum { kNone, kThrottled, kServer, kConnection } kind = kNone;
};

Verdict Judge(PendingRequest::Transfer* t, CURLcode code, HttpResponse* out) {
  const HttpRequest& r = t->request;
  const std::string what = Describe(r);
  if (code != CURLE_OK) {
    if (t->overflow) {
      return {Outcome::kFail,
              absl::DataLossError(absl::StrCat(what, ": the server sent more bytes than asked (",
                                               r.range ? r.length : kMaxBody, ")"))};
    }
    const std::string detail =
        absl::StrCat(curl_easy_strerror(code), t->error[0] ? absl::StrCat(": ", t->error) : "");
    switch (code) {
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_COULDNT_CONNECT:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_PARTIAL_FILE:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        return {Outcome::kRetry, absl::UnavailableError(absl::StrCat(what, ": ", detail)),
                Verdict::kConnection};
      case CURLE_SSL_CONNECT_ERROR:
        return {Outcome::kFail,
                absl::UnavailableError(absl::StrCat(
                    what, ": ", detail,
                    " (the TLS handshake failed: is it an http:// server given as https://?)"))};
      case CURLE_COULDNT_RESOLVE_HOST:
        return {Outcome::kFail,
                absl::UnavailableError(absl::StrCat(
                    what, ": ", detail,
                    r.aws && r.aws->endpoint.empty()
                        ? " (no endpoint is set, so this is AWS's address: for another S3 "
                          "server set AWS_ENDPOINT_URL, docs/storage.md)"
                        : ""))};
      case CURLE_PEER_FAILED_VERIFICATION:
        return {Outcome::kFail,
                absl::UnavailableError(absl::StrCat(
                    what, ": ", detail,
                    " (the server's TLS certificate is not trusted: for a private endpoint, "
                    "give its CA with AWS_CA_BUNDLE or SLUICE_CA_BUNDLE)"))};
      default:
        return {Outcome::kFail, absl::UnavailableError(absl::StrCat(what, ": ", detail))};
    }
  }
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
  const long s = t->status;
  if (s >= 200 && s < 300) {
    out->status = s;
    out->etag = t->etag;
    curl_off_t length = -1;
    curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
    out->object_size = length >= 0 ? static_cast<uint64_t>(length) : 0;
    if (r.range) {
      // The body must be exactly the range asked: a 206 saying so, or a 200 of a whole object
      // of that length (a server that ignores Range on a small object).
      uint64_t a = 0, b = 0, total = 0;
      bool ok = false;
      if (s == 206) {
        absl::string_view cr = t->content_range;
        if (absl::ConsumePrefix(&cr, "bytes ")) {
          const size_t dash = cr.find('-'), slash = cr.find('/');
          ok = dash != absl::string_view::npos && slash != absl::string_view::npos &&
               absl::SimpleAtoi(cr.substr(0, dash), &a) &&
               absl::SimpleAtoi(cr.substr(dash + 1, slash - dash - 1), &b) &&
               absl::SimpleAtoi(cr.substr(slash + 1), &total) && a == r.offset &&
               b + 1 == r.offset + r.length;
        }
        out->object_size = total;
      } else {
        ok = r.offset == 0 && out->object_size == r.length;
      }
      if (!ok || t->received != r.length) {
        return {Outcome::kFail,
                absl::DataLossError(
                    absl::StrCat(what, ": expected ", r.length, " bytes at offset ", r.offset,
                                 ", got HTTP ", s, " with ", t->received, " bytes",
                                 t->content_range.empty()
                                     ? ""
                                     : absl::StrCat(" (Content-Range ", t->content_range, ")")))};
      }
    } else if (!r.head) {
      out->object_size = t->body.size();
      out->body = std::move(t->body);
    }
    return {Outcome::kDone, absl::OkStatus()};
  }
  const std::string why =
      absl::StrCat(what, ": HTTP ", s, ErrorDetail(t->body),
                   r.aws && r.aws->anonymous() && s >= 400 && s < 500
                       ? " (no credentials were found, so the request went unsigned: set "
                         "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile)"
                       : "");
  if (s == 429 || s == 503) {
    return {Outcome::kRetry, absl::UnavailableError(why), Verdict::kThrottled};
  }
  if (s >= 500) return {Outcome::kRetry, absl::UnavailableError(why), Verdict::kServer};
  if (s == 404) {
    return {Outcome::kFail, absl::NotFoundError(absl::StrCat(why, ": no such object"))};
  }
  if (s == 401 || s == 403) {
    return {Outcome::kFail,
            absl::PermissionDeniedError(
                absl::StrCat(why, r.aws ? absl::StrCat(": access denied with ", r.aws->Describe())
                                        : ": access denied"))};
  }
  if (s == 412 && !r.if_match.empty()) {
    return {
        Outcome::kFail,
        absl::FailedPreconditionError(
            absl::StrCat(why, ": the object changed since it was opened (its ETag is no longer ",
                         r.if_match, "): the dataset was replaced while it was read; start again")),
    };
  }
  if (s == 416) {
    return {Outcome::kFail,
            absl::DataLossError(absl::StrCat(why, ": the object is shorter than expected"))};
  }
  return {Outcome::kFail, absl::InvalidArgumentError(why)};
}

}  // namespace

void HttpClient::Loop() {
  State& st = *state_;
  std::vector<std::shared_ptr<PendingRequest>> incoming;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(st.mu);
      incoming.assign(st.submitted.begin(), st.submitted.end());
      st.submitted.clear();
    }
    const std::atomic<bool>* stop = g_stop.load();
    const bool stopping = stop != nullptr && stop->load(std::memory_order_relaxed);
    const Clock::time_point now = Clock::now();
    auto add = [&](const std::shared_ptr<PendingRequest>& p) {
      PendingRequest::Transfer* t = p->transfer();
      Prepare(t);
      ++t->attempts;
      t->attempt_start = Clock::now();
      curl_multi_add_handle(st.multi, t->easy);
      st.active.push_back(p);
      std::lock_guard<std::mutex> lock(st.stats_mu);
      ++st.stats.requests;
      if (t->attempts > 1) ++st.stats.retries;
      SetInFlight(&st.stats, static_cast<int64_t>(st.active.size()));
      st.stats.max_in_flight = std::max(st.stats.max_in_flight, st.stats.in_flight);
    };
    auto cancel = [&](const std::shared_ptr<PendingRequest>& p) {
      {
        std::lock_guard<std::mutex> lock(st.stats_mu);
        ++st.stats.failed;
      }
      Finish(p, absl::CancelledError(absl::StrCat(Describe(p->transfer()->request),
                                                  ": stopped (SIGINT/SIGTERM) in flight")));
    };
    if (stopping) {
      for (auto& p : st.active) curl_multi_remove_handle(st.multi, p->transfer()->easy);
      for (auto& p : st.active) cancel(p);
      for (auto& p : st.waiting) cancel(p);
      for (auto& p : incoming) cancel(p);
      st.active.clear();
      st.waiting.clear();
      incoming.clear();
      std::lock_guard<std::mutex> lock(st.stats_mu);
      SetInFlight(&st.stats, 0);
      SetReceiving(&st.stats, 0);
    }
    for (auto& p : incoming) {
      auto dead = st.unreachable.find(HostOf(p->transfer()->request.url));
      if (dead != st.unreachable.end() &&
          std::chrono::duration<double>(Clock::now() - dead->second.since).count() >=
              retry_budget_s_) {
        st.unreachable.erase(dead);  // a budget has passed: try the server again
        dead = st.unreachable.end();
      }
      if (dead == st.unreachable.end()) {
        add(p);
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(st.stats_mu);
        ++st.stats.failed;
      }
      Finish(p, absl::Status(dead->second.status.code(),
                             absl::StrCat(Describe(p->transfer()->request),
                                          ": not tried: an earlier request to this server gave "
                                          "up (",
                                          dead->second.status.message(), ")")));
    }
    incoming.clear();
    for (size_t i = 0; i < st.waiting.size();) {
      if (st.waiting[i]->transfer()->retry_at <= now) {
        add(st.waiting[i]);
        st.waiting[i] = st.waiting.back();
        st.waiting.pop_back();
      } else {
        ++i;
      }
    }
    int running = 0;
    curl_multi_perform(st.multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(st.multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* easy = msg->easy_handle;
      const CURLcode code = msg->data.result;
      curl_multi_remove_handle(st.multi, easy);
      auto it = std::find_if(st.active.begin(), st.active.end(),
                             [&](const auto& p) { return p->transfer()->easy == easy; });
      if (it == st.active.end()) continue;
      std::shared_ptr<PendingRequest> p = std::move(*it);
      *it = st.active.back();
      st.active.pop_back();
      PendingRequest::Transfer* t = p->transfer();
      HttpResponse response;
      Verdict v = Judge(t, code, &response);
      const Clock::time_point end = Clock::now();
      const double elapsed_s = std::chrono::duration<double>(end - t->first_start).count();
      {
        std::lock_guard<std::mutex> lock(st.stats_mu);
        SetInFlight(&st.stats, static_cast<int64_t>(st.active.size()));
        st.stats.bytes += t->received;
        if (v.kind == Verdict::kThrottled) ++st.stats.throttled;
        if (v.kind == Verdict::kServer) ++st.stats.server_errors;
        if (v.kind == Verdict::kConnection) ++st.stats.connection_errors;
      }
      if (v.outcome == Outcome::kRetry && elapsed_s < retry_budget_s_) {
        // Full jitter over a capped exponential, at least the server's Retry-After.
        const double ceiling =
            std::min(kBackoffCapS, kBackoffBaseS * std::ldexp(1.0, std::min(t->attempts, 30)));
        double delay = std::uniform_real_distribution<double>(0, ceiling)(st.rng);
        double after = 0;
        if (absl::SimpleAtod(t->retry_after, &after))
          delay = std::max(delay, std::min(after, kBackoffCapS));
        delay = std::min(delay, std::max(0.0, retry_budget_s_ - elapsed_s));
        t->retry_at =
            end + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
        st.waiting.push_back(std::move(p));
        continue;
      }
      if (v.outcome == Outcome::kDone) {
        response.attempts = t->attempts;
        response.latency_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(end - t->attempt_start).count();
        {
          std::lock_guard<std::mutex> lock(st.stats_mu);
          ++st.stats.succeeded;
          st.stats.latency.Add(response.latency_ns);
        }
        curl_easy_cleanup(t->easy);
        t->easy = nullptr;
        Finish(p, std::move(response));
      } else {
        {
          std::lock_guard<std::mutex> lock(st.stats_mu);
          ++st.stats.failed;
        }
        absl::Status s = v.status;
        if (v.outcome == Outcome::kRetry) {
          s = absl::Status(s.code(),
                           absl::StrCat(s.message(), " (gave up after ", t->attempts,
                                        " attempts over ", static_cast<int>(elapsed_s + 0.5),
                                        " s: the retry budget, SLUICE_RETRY_SECONDS, is ",
                                        retry_budget_s_, " s)"));
          if (v.kind == Verdict::kConnection) {
            st.unreachable.insert_or_assign(HostOf(t->request.url),
                                            State::Unreachable{s, Clock::now()});
          }
        }
        curl_easy_cleanup(t->easy);
        t->easy = nullptr;
        Finish(p, s);
      }
    }
    {
      // Those of the requests still in flight whose body has begun: one that began and ended
      // within one curl_multi_perform (a small body arriving at once) took no time receiving.
      int64_t receiving = 0;
      for (const auto& p : st.active) receiving += p->transfer()->received > 0 ? 1 : 0;
      std::lock_guard<std::mutex> lock(st.stats_mu);
      if (receiving != st.stats.receiving || receiving > 0) SetReceiving(&st.stats, receiving);
    }
    int timeout_ms = kPollMs;
    for (const auto& p : st.waiting) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          p->transfer()->retry_at - Clock::now())
                          .count();
      timeout_ms = std::clamp(static_cast<int>(ms), 0, timeout_ms);
    }
    curl_multi_poll(st.multi, nullptr, 0, timeout_ms, nullptr);
  }
}

}  // namespace sluice::remote
