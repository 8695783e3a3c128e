// HttpClient (storage/remote/http_client.h) and UrlEnv's remote reads (remote_env.h) against a
// minimal HTTP/1.1 server in the test: a socket on 127.0.0.1 (port 0) whose thread answers each
// connection with a canned response and closes it. What is checked: a range GET's bytes land in
// dest and nowhere else; each status maps to its code (404, 403, 412, 4xx, 416) and names the
// request by its display path; 5xx, 429 and a dropped connection are retried within the budget;
// a body longer than the range or a wrong Content-Range is kDataLoss; the stop flag cancels;
// signed requests carry SigV4 headers while messages hold no secret; UrlEnv opens with a HEAD,
// reads with If-Match range GETs, caches, fetches ahead and refuses a replaced object.
//
// SLUICE_RETRY_SECONDS is read once, at the client's first use, so every test that makes a
// request is in this binary, and the variable is set before any test runs.
#include "storage/remote/http_client.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/env.h"
#include "storage/remote/aws_config.h"
#include "storage/remote/remote_env.h"

namespace sluice::remote {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr char kDisplay[] = "s3://bucket/train-00000.shard";

// Before any test: a 1 s retry budget (a give-up takes 1 s, three attempts fit well within it)
// and no proxy between the client and 127.0.0.1.
class RetryBudgetEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ::setenv("SLUICE_RETRY_SECONDS", "1", 1);
    for (const char* v :
         {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
      ::unsetenv(v);
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kRetryBudgetEnvironment =
    ::testing::AddGlobalTestEnvironment(new RetryBudgetEnvironment);

struct SeenRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// One response: status line, headers, Content-Length (the body's unless given), Connection:
// close, then the body.
std::string Reply(int status, const std::string& body, const std::vector<std::string>& headers = {},
                  int64_t content_length = -1) {
  std::string out = absl::StrCat("HTTP/1.1 ", status, " Canned\r\n");
  for (const std::string& h : headers) absl::StrAppend(&out, h, "\r\n");
  absl::StrAppend(&out, "Content-Length: ",
                  content_length >= 0 ? content_length : static_cast<int64_t>(body.size()),
                  "\r\nConnection: close\r\n\r\n", body);
  return out;
}

// A 206 of `body` at [first, last] of an object of `total` bytes.
std::string Partial(const std::string& body, uint64_t first, uint64_t last, uint64_t total,
                    std::vector<std::string> headers = {}) {
  headers.push_back(absl::StrCat("Content-Range: bytes ", first, "-", last, "/", total));
  return Reply(206, body, headers);
}

std::string S3Error(const std::string& code, const std::string& message) {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>", code,
                      "</Code><Message>", message, "</Message></Error>");
}

// The HTTP server: serves one connection at a time, each with one request (headers only: the
// client sends no bodies) and the handler's response; an empty response closes the connection
// without answering.
class TestServer {
 public:
  using Handler = std::function<std::string(const SeenRequest&, int index)>;

  explicit TestServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 64), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TestServer() {
    stop_.store(true);
    thread_.join();
    ::close(fd_);
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  std::string Url(const std::string& path) const {
    return absl::StrCat("http://127.0.0.1:", port_, path);
  }
  std::vector<SeenRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(requests_.size());
  }

 private:
  void Serve() {
    while (!stop_.load()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      Handle(c);
      ::close(c);
    }
  }

  void Handle(int c) {
    std::string in;
    char buf[4096];
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
    while (in.find("\r\n\r\n") == std::string::npos) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) {
        if (Clock::now() > deadline || stop_.load()) return;
        continue;
      }
      const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
    }
    SeenRequest r;
    std::vector<std::string> lines =
        absl::StrSplit(in.substr(0, in.find("\r\n\r\n")), "\r\n", absl::SkipEmpty());
    if (lines.empty()) return;
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    if (first.size() >= 2) {
      r.method = first[0];
      r.target = first[1];
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    int index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = static_cast<int>(requests_.size());
      requests_.push_back(r);
    }
    const std::string out = handler_(r, index);
    for (size_t sent = 0; sent < out.size();) {
      const ssize_t n = ::send(c, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
    // Half-close, then wait (briefly) for the client to close: closing with unread bytes
    // would reset the connection under the response.
    ::shutdown(c, SHUT_WR);
    for (int i = 0; i < 20; ++i) {
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 25) <= 0) continue;
      if (::recv(c, buf, sizeof(buf), 0) <= 0) break;
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<SeenRequest> requests_;
};

// Answers `script[i]` to the i-th request (the last one to any later request).
TestServer::Handler Script(std::vector<std::string> script) {
  return [script = std::move(script)](const SeenRequest&, int index) {
    return script[std::min<size_t>(static_cast<size_t>(index), script.size() - 1)];
  };
}

// A range GET of [offset, offset + length) of `url` into `dest`.
HttpRequest RangeGet(const std::string& url, uint64_t offset, uint64_t length, char* dest) {
  HttpRequest r;
  r.url = url;
  r.display = kDisplay;
  r.range = true;
  r.offset = offset;
  r.length = length;
  r.dest = dest;
  return r;
}

std::string Bytes(size_t n, int seed) {
  std::string p(n, '\0');
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<char>((i * 13 + static_cast<size_t>(seed)) & 0xff);
  return p;
}

// The status of a range GET of bytes 100-109 answered by `script`, with the server's count.
struct Outcome {
  absl::StatusOr<HttpResponse> result;
  int requests;
  std::string dest;
};
Outcome RangeGetAnsweredBy(std::vector<std::string> script, const std::string& if_match = "") {
  TestServer server(Script(std::move(script)));
  std::string dest(12, 'Z');  // 10 asked + 2 guard bytes
  HttpRequest r = RangeGet(server.Url("/data/obj.bin"), 100, 10, dest.data());
  r.if_match = if_match;
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(std::move(r));
  return {std::move(got), server.count(), dest};
}

TEST(HttpClientTest, RetryBudgetIsReadFromTheEnvironment) {
  EXPECT_EQ(HttpClient::Global().retry_budget_s(), 1.0);
  EXPECT_EQ(&HttpClient::Global(), &HttpClient::Global());
}

TEST(HttpClientTest, RangeGetBytesLandInDestAndNowhereElse) {
  const std::string body = Bytes(10, 1);
  TestServer server(Script({Partial(body, 100, 109, 1000, {"ETag: \"abc\""})}));
  std::string dest(12, 'Z');
  HttpRequest r = RangeGet(server.Url("/data/obj.bin"), 100, 10, dest.data());
  r.if_match = "\"abc\"";
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(std::move(r));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(dest.substr(0, 10), body);
  EXPECT_EQ(dest.substr(10), "ZZ");
  EXPECT_EQ(got->status, 206);
  EXPECT_EQ(got->object_size, 1000u);
  EXPECT_EQ(got->etag, "\"abc\"");
  EXPECT_EQ(got->attempts, 1);
  EXPECT_GE(got->latency_ns, 0);
  EXPECT_TRUE(got->body.empty());

  const std::vector<SeenRequest> seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].target, "/data/obj.bin");
  EXPECT_EQ(seen[0].Header("range"), "bytes=100-109");
  EXPECT_EQ(seen[0].Header("if-match"), "\"abc\"");
  EXPECT_EQ(seen[0].Header("authorization"), "");  // no AwsConfig: unsigned
}

TEST(HttpClientTest, AWhole200ObjectOfTheRangesLengthAtOffsetZeroIsAccepted) {
  const std::string body = Bytes(10, 2);
  TestServer server(Script({Reply(200, body)}));
  std::string dest(10, '\0');
  absl::StatusOr<HttpResponse> got =
      HttpClient::Global().Perform(RangeGet(server.Url("/o"), 0, 10, dest.data()));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(dest, body);
  EXPECT_EQ(got->object_size, 10u);
}

TEST(HttpClientTest, A200ThatIsNotExactlyTheRangeIsDataLoss) {
  // A server ignoring Range on a longer object, or on a range not at 0.
  Outcome longer = RangeGetAnsweredBy({Reply(200, Bytes(20, 3))});
  EXPECT_EQ(longer.result.status().code(), absl::StatusCode::kDataLoss) << longer.result.status();
  EXPECT_EQ(longer.dest.substr(10), "ZZ");
  Outcome at100 = RangeGetAnsweredBy({Reply(200, Bytes(10, 3))});
  EXPECT_EQ(at100.result.status().code(), absl::StatusCode::kDataLoss) << at100.result.status();
  EXPECT_EQ(at100.requests, 1);
}

TEST(HttpClientTest, HeadGivesTheObjectSizeAndETag) {
  TestServer server(Script({Reply(200, "", {"ETag: \"d41d8cd9\""}, 123456789)}));
  HttpRequest r;
  r.url = server.Url("/ds/train.manifest.json");
  r.display = kDisplay;
  r.head = true;
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(std::move(r));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->object_size, 123456789u);
  EXPECT_EQ(got->etag, "\"d41d8cd9\"");
  ASSERT_EQ(server.count(), 1);
  EXPECT_EQ(server.requests()[0].method, "HEAD");
}

TEST(HttpClientTest, APlainGetGivesTheBody) {
  TestServer server(Script({Reply(200, "{\"split\": \"train\"}")}));
  HttpRequest r;
  r.url = server.Url("/ds/train.manifest.json");
  r.display = kDisplay;
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(std::move(r));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->body, "{\"split\": \"train\"}");
  EXPECT_EQ(got->object_size, got->body.size());
  EXPECT_EQ(server.requests()[0].Header("range"), "");
}

TEST(HttpClientTest, NotFoundNamesTheDisplayPathRangeAndS3CodeAndIsNotRetried) {
  Outcome o =
      RangeGetAnsweredBy({Reply(404, S3Error("NoSuchKey", "The specified key does not exist."))});
  ASSERT_FALSE(o.result.ok());
  EXPECT_EQ(o.result.status().code(), absl::StatusCode::kNotFound);
  const std::string m(o.result.status().message());
  EXPECT_THAT(m, HasSubstr(absl::StrCat(kDisplay, ": GET bytes=100-109: HTTP 404")));
  EXPECT_THAT(m, HasSubstr("(NoSuchKey: The specified key does not exist.)"));
  EXPECT_THAT(m, Not(HasSubstr("127.0.0.1")));  // the request's URL is not the user's path
  EXPECT_EQ(o.requests, 1);
  EXPECT_EQ(o.dest, std::string(12, 'Z'));  // an error body never lands in dest
}

TEST(HttpClientTest, ForbiddenAndUnauthorizedArePermissionDeniedAndNotRetried) {
  for (int status : {403, 401}) {
    Outcome o = RangeGetAnsweredBy({Reply(status, S3Error("AccessDenied", "Access Denied"))});
    ASSERT_FALSE(o.result.ok()) << status;
    EXPECT_EQ(o.result.status().code(), absl::StatusCode::kPermissionDenied) << status;
    EXPECT_THAT(std::string(o.result.status().message()), HasSubstr(kDisplay));
    EXPECT_THAT(std::string(o.result.status().message()), HasSubstr("access denied"));
    EXPECT_EQ(o.requests, 1) << status;
  }
}

TEST(HttpClientTest, PreconditionFailedIsFailedPreconditionNamingTheETag) {
  Outcome o = RangeGetAnsweredBy({Reply(412, S3Error("PreconditionFailed", "x"))}, "\"v1\"");
  ASSERT_FALSE(o.result.ok());
  EXPECT_EQ(o.result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(o.result.status().message()), HasSubstr("\"v1\""));
  EXPECT_THAT(std::string(o.result.status().message()), HasSubstr(kDisplay));
  EXPECT_EQ(o.requests, 1);
}

TEST(HttpClientTest, OtherClientErrorsFailAtOnce) {
  Outcome bad = RangeGetAnsweredBy({Reply(400, "")});
  EXPECT_EQ(bad.result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.result.status().message()), HasSubstr("HTTP 400"));
  EXPECT_EQ(bad.requests, 1);
  Outcome range = RangeGetAnsweredBy({Reply(416, "")});
  EXPECT_EQ(range.result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(range.result.status().message()), HasSubstr("shorter than expected"));
  EXPECT_EQ(range.requests, 1);
}

TEST(HttpClientTest, ThrottledTwiceThenPartialSucceedsOnTheThirdAttempt) {
  HttpClient& client = HttpClient::Global();
  const HttpStats before = client.Stats();
  const std::string body = Bytes(10, 4);
  Outcome o = RangeGetAnsweredBy({Reply(503, S3Error("SlowDown", "Reduce your request rate.")),
                                  Reply(503, ""), Partial(body, 100, 109, 1000)});
  ASSERT_TRUE(o.result.ok()) << o.result.status();
  EXPECT_EQ(o.result->attempts, 3);
  EXPECT_EQ(o.requests, 3);
  EXPECT_EQ(o.dest.substr(0, 10), body);
  const HttpStats after = client.Stats();
  EXPECT_EQ(after.retries - before.retries, 2u);
  EXPECT_EQ(after.throttled - before.throttled, 2u);
  EXPECT_EQ(after.requests - before.requests, 3u);
  EXPECT_EQ(after.succeeded - before.succeeded, 1u);
  EXPECT_EQ(after.failed - before.failed, 0u);
  EXPECT_EQ(after.in_flight, 0);
}

TEST(HttpClientTest, ServerErrorsAndTooManyRequestsAreRetried) {
  HttpClient& client = HttpClient::Global();
  const HttpStats before = client.Stats();
  const std::string body = Bytes(10, 5);
  // 500, then 429 with a Retry-After the client honours (up to its cap), then 206.
  Outcome o = RangeGetAnsweredBy(
      {Reply(500, ""), Reply(429, "", {"Retry-After: 0"}), Partial(body, 100, 109, 1000)});
  ASSERT_TRUE(o.result.ok()) << o.result.status();
  EXPECT_EQ(o.result->attempts, 3);
  EXPECT_EQ(o.dest.substr(0, 10), body);
  const HttpStats after = client.Stats();
  EXPECT_EQ(after.server_errors - before.server_errors, 1u);
  EXPECT_EQ(after.throttled - before.throttled, 1u);
  EXPECT_EQ(after.retries - before.retries, 2u);
}

TEST(HttpClientTest, AConnectionClosedWithoutAnAnswerIsRetried) {
  HttpClient& client = HttpClient::Global();
  const HttpStats before = client.Stats();
  const std::string body = Bytes(10, 6);
  Outcome o = RangeGetAnsweredBy({"", Partial(body, 100, 109, 1000)});
  ASSERT_TRUE(o.result.ok()) << o.result.status();
  EXPECT_EQ(o.result->attempts, 2);
  EXPECT_EQ(o.dest.substr(0, 10), body);
  const HttpStats after = client.Stats();
  EXPECT_EQ(after.connection_errors - before.connection_errors, 1u);
  EXPECT_EQ(after.retries - before.retries, 1u);
}

TEST(HttpClientTest, GivesUpWhenTheRetryBudgetIsSpent) {
  HttpClient& client = HttpClient::Global();
  const HttpStats before = client.Stats();
  const Clock::time_point start = Clock::now();
  Outcome o = RangeGetAnsweredBy({Reply(503, "")});
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(o.result.ok());
  EXPECT_EQ(o.result.status().code(), absl::StatusCode::kUnavailable);
  const std::string m(o.result.status().message());
  EXPECT_THAT(m, HasSubstr(absl::StrCat("gave up after ", o.requests, " attempts")));
  EXPECT_THAT(m, HasSubstr("SLUICE_RETRY_SECONDS"));
  EXPECT_THAT(m, HasSubstr(kDisplay));
  EXPECT_GE(o.requests, 2);
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 3.0);
  EXPECT_EQ(client.Stats().failed - before.failed, 1u);
}

TEST(HttpClientTest, ARefusedConnectionIsRetriedThenUnavailable) {
  // A port nobody listens on: bound, then closed.
  int port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    ::close(fd);
  }
  const HttpStats before = HttpClient::Global().Stats();
  char dest[4];
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(
      RangeGet(absl::StrCat("http://127.0.0.1:", port, "/x"), 0, 4, dest));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("gave up after"));
  EXPECT_GE(HttpClient::Global().Stats().connection_errors - before.connection_errors, 2u);
}

// A server that used up the retry budget with refused connections is not tried again for one
// more budget (later requests fail at once, naming the earlier failure), and is tried after it:
// a long-lived process outlives a store's outage.
TEST(HttpClientTest, AServerThatGaveUpIsSkippedForOneBudgetThenTriedAgain) {
  // Bound but not listening: connections are refused until listen().
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port), "/x");
  HttpClient& client = HttpClient::Global();
  char dest[4];
  absl::StatusOr<HttpResponse> got = client.Perform(RangeGet(url, 0, 4, dest));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("gave up after"));
  const Clock::time_point gave_up = Clock::now();

  const HttpStats before = client.Stats();
  got = client.Perform(RangeGet(url, 0, 4, dest));
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("not tried"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("gave up after"));
  EXPECT_EQ(client.Stats().connection_errors, before.connection_errors);  // no connection made
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - gave_up).count(), 0.5);

  // The server comes back; once a budget (1 s here) has passed since, the client tries it.
  ASSERT_EQ(::listen(fd, 4), 0);
  std::thread serve([fd] {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return;
    const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    std::string in;
    char buf[4096];
    while (in.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    const std::string out = Partial("abcd", 0, 3, 10);
    ::send(c, out.data(), out.size(), MSG_NOSIGNAL);
    ::shutdown(c, SHUT_WR);
    while (::recv(c, buf, sizeof(buf), 0) > 0) {
    }
    ::close(c);
  });
  std::this_thread::sleep_until(gave_up + std::chrono::milliseconds(1100));
  got = client.Perform(RangeGet(url, 0, 4, dest));
  serve.join();
  ::close(fd);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::string(dest, 4), "abcd");
}

// Serves one range request on a fresh loopback port: the status line and headers after
// `first_byte_ms`, then the 1,000-byte body in `pieces` pieces `gap_ms` apart.
class TrickleServer {
 public:
  TrickleServer(int first_byte_ms, int pieces, int gap_ms) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    url_ = absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port), "/x");
    thread_ = std::thread([this, first_byte_ms, pieces, gap_ms] {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) <= 0) return;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(first_byte_ms));
      const std::string body(1000, 'b');
      const std::string head = absl::StrCat(
          "HTTP/1.1 206 Partial Content\r\nContent-Length: 1000\r\nContent-Range: bytes "
          "0-999/5000\r\nConnection: close\r\n\r\n");
      ::send(c, head.data(), head.size(), MSG_NOSIGNAL);
      const size_t piece = body.size() / static_cast<size_t>(pieces);
      for (int i = 0; i < pieces; ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
        const size_t n = i + 1 == pieces ? body.size() - piece * i : piece;
        ::send(c, body.data() + piece * i, n, MSG_NOSIGNAL);
      }
      ::shutdown(c, SHUT_WR);
      pollfd q{c, POLLIN, 0};  // the client closes (Connection: close); never wait long
      while (::poll(&q, 1, 2000) > 0 && ::recv(c, buf, sizeof(buf), 0) > 0) {
      }
      ::close(c);
    });
  }
  ~TrickleServer() {
    thread_.join();
    ::close(fd_);
  }
  const std::string& url() const { return url_; }

 private:
  int fd_ = -1;
  std::string url_;
  std::thread thread_;
};

// receiving_fraction tells latency from bandwidth: a response that waits 400 ms for its first
// byte and then arrives at once was receiving for almost none of its time in flight; one whose
// body trickles in over 400 ms, for almost all of it.
TEST(HttpClientTest, ReceivingFractionTellsAWaitForTheFirstByteFromASlowBody) {
  HttpClient& client = HttpClient::Global();
  std::string dest(1000, '\0');
  {
    TrickleServer latency(/*first_byte_ms=*/400, /*pieces=*/1, /*gap_ms=*/0);
    client.ResetStats();
    auto got = client.Perform(RangeGet(latency.url(), 0, 1000, dest.data()));
    ASSERT_TRUE(got.ok()) << got.status();
    const HttpStats s = client.Stats();
    EXPECT_LT(s.receiving_fraction, 0.2) << "a wait for the first byte counted as receiving";
  }
  {
    TrickleServer bandwidth(/*first_byte_ms=*/0, /*pieces=*/9, /*gap_ms=*/50);
    client.ResetStats();
    auto got = client.Perform(RangeGet(bandwidth.url(), 0, 1000, dest.data()));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(dest, std::string(1000, 'b'));
    const HttpStats s = client.Stats();
    EXPECT_GT(s.receiving_fraction, 0.8) << "a trickling body not counted as receiving";
    EXPECT_LE(s.receiving_fraction, 1.0);
  }
}

TEST(HttpClientTest, ABodyLongerThanTheRangeIsDataLossAndNeverOverrunsDest) {
  Outcome o = RangeGetAnsweredBy({Partial(Bytes(20, 6), 100, 109, 1000)});
  ASSERT_FALSE(o.result.ok());
  EXPECT_EQ(o.result.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(o.result.status().message()), HasSubstr("more bytes than asked"));
  EXPECT_THAT(std::string(o.result.status().message()), HasSubstr(kDisplay));
  EXPECT_EQ(o.dest.substr(10), "ZZ");
  EXPECT_EQ(o.requests, 1);  // not retried
}

TEST(HttpClientTest, APartialOfAnotherRangeOrWithoutContentRangeIsDataLoss) {
  const std::string body = Bytes(10, 7);
  for (const std::string& reply :
       {Partial(body, 0, 9, 1000), Partial(body, 100, 110, 1000), Partial(body, 101, 110, 1000),
        Reply(206, body), Reply(206, body, {"Content-Range: bytes */1000"}),
        Partial(Bytes(5, 7), 100, 109, 1000)}) {
    Outcome o = RangeGetAnsweredBy({reply});
    ASSERT_FALSE(o.result.ok()) << reply;
    EXPECT_EQ(o.result.status().code(), absl::StatusCode::kDataLoss) << reply;
    EXPECT_THAT(std::string(o.result.status().message()),
                HasSubstr("expected 10 bytes at offset 100"))
        << reply;
    EXPECT_EQ(o.requests, 1) << reply;
  }
  Outcome wrong = RangeGetAnsweredBy({Partial(body, 0, 9, 1000)});
  EXPECT_THAT(std::string(wrong.result.status().message()),
              HasSubstr("(Content-Range bytes 0-9/1000)"));
}

TEST(HttpClientTest, StartedRequestsRunTogetherAndEachLandsInItsDest) {
  TestServer server([](const SeenRequest& r, int) {
    uint64_t first = 0;
    const std::string header = r.Header("range");
    absl::string_view range = header;
    absl::ConsumePrefix(&range, "bytes=");
    EXPECT_TRUE(absl::SimpleAtoi(range.substr(0, range.find('-')), &first)) << range;
    return Partial(Bytes(100, static_cast<int>(first)), first, first + 99, 800);
  });
  std::vector<std::string> dests(8, std::string(100, '\0'));
  std::vector<std::shared_ptr<PendingRequest>> pending;
  for (int i = 0; i < 8; ++i) {
    pending.push_back(
        HttpClient::Global().Start(RangeGet(server.Url("/o"), i * 100, 100, dests[i].data())));
  }
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<HttpResponse> got = pending[i]->Wait();
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    EXPECT_TRUE(pending[i]->done());
    EXPECT_EQ(dests[i], Bytes(100, i * 100)) << i;
  }
  EXPECT_EQ(server.count(), 8);
  EXPECT_GE(HttpClient::Global().Stats().max_in_flight, 1);
}

TEST(HttpClientTest, TheStopFlagCancelsARequestWaitingToRetry) {
  static std::atomic<bool> stop{false};
  stop.store(false);
  HttpClient::SetStopFlag(&stop);
  TestServer server(Script({Reply(503, "")}));
  char dest[10];
  std::shared_ptr<PendingRequest> p =
      HttpClient::Global().Start(RangeGet(server.Url("/o"), 100, 10, dest));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(p->done());
  const Clock::time_point set = Clock::now();
  stop.store(true);
  absl::StatusOr<HttpResponse> got = p->Wait();
  const double took = std::chrono::duration<double>(Clock::now() - set).count();
  stop.store(false);
  HttpClient::SetStopFlag(nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr(kDisplay));
  EXPECT_LT(took, 0.5);
}

TEST(HttpClientTest, SignedRequestsCarrySigV4HeadersAndTheirErrorsNoSecret) {
  auto aws = std::make_shared<AwsConfig>();
  aws->access_key = "AKIDEXAMPLE0000TEST";
  aws->secret_key = "SECRETexampleKEYthatMUSTnotLEAK";
  aws->session_token = "TOKENexampleTHATmustNOTleak";
  aws->region = "us-west-2";
  aws->credentials_from = "the environment (AWS_ACCESS_KEY_ID)";
  TestServer server(Script({Reply(403, S3Error("SignatureDoesNotMatch", "nope"))}));
  aws->endpoint = server.Url("");
  char dest[10];
  HttpRequest r = RangeGet(aws->ObjectUrl("bucket", "train-00000.shard"), 100, 10, dest);
  r.aws = aws;
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(std::move(r));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied);
  const std::string m(got.status().message());
  EXPECT_THAT(m, HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(m, HasSubstr("region us-west-2"));
  EXPECT_THAT(m, HasSubstr("credentials from the environment"));
  EXPECT_THAT(m, Not(HasSubstr(aws->secret_key)));
  EXPECT_THAT(m, Not(HasSubstr(aws->session_token)));

  ASSERT_EQ(server.count(), 1);
  const SeenRequest seen = server.requests()[0];
  EXPECT_EQ(seen.target, "/bucket/train-00000.shard");  // path-style for a custom endpoint
  const std::string auth = seen.Header("authorization");
  EXPECT_THAT(auth, HasSubstr("AWS4-HMAC-SHA256"));
  EXPECT_THAT(auth, HasSubstr("Credential=AKIDEXAMPLE0000TEST/"));
  EXPECT_THAT(auth, HasSubstr("/us-west-2/s3/aws4_request"));
  EXPECT_THAT(auth, HasSubstr("Signature="));
  EXPECT_THAT(auth, Not(HasSubstr(aws->secret_key)));
  EXPECT_EQ(seen.Header("x-amz-security-token"), aws->session_token);
  EXPECT_EQ(seen.Header("x-amz-content-sha256"),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_FALSE(seen.Header("x-amz-date").empty());
}

TEST(HttpClientTest, AnonymousAwsRequestsAreUnsigned) {
  auto aws = std::make_shared<AwsConfig>();  // no keys
  const std::string body = Bytes(10, 8);
  TestServer server(Script({Partial(body, 100, 109, 1000)}));
  aws->endpoint = server.Url("");
  std::string dest(10, '\0');
  HttpRequest r = RangeGet(aws->ObjectUrl("public-bucket", "k"), 100, 10, dest.data());
  r.aws = aws;
  absl::StatusOr<HttpResponse> got = HttpClient::Global().Perform(std::move(r));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(dest, body);
  EXPECT_EQ(server.requests()[0].Header("authorization"), "");
  EXPECT_EQ(server.requests()[0].Header("x-amz-content-sha256"), "");
}

// UrlEnv reading an object served over HTTP: /ds/obj.bin, 1000 bytes, ETag etag_ (a range GET
// whose If-Match is not the current ETag gets 412, as S3 answers).
class UrlEnvHttpTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kSize = 1000;

  void SetUp() override {
    std::string tmpl = absl::StrCat(::testing::TempDir(), "url_env_http_XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    saved_ = CurrentRemoteOptions();
    Configure(/*cache_bytes=*/0);
    content_ = Bytes(kSize, 9);
    server_ = std::make_unique<TestServer>([this](const SeenRequest& r, int) { return Answer(r); });
    url_ = server_->Url("/ds/obj.bin");
  }
  void TearDown() override {
    server_.reset();
    ConfigureRemote(saved_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Configure(uint64_t cache_bytes) {
    RemoteOptions o;
    o.cache_dir = dir_ + "/cache";
    o.cache_bytes = cache_bytes;
    ConfigureRemote(o);
  }

  std::string Answer(const SeenRequest& r) {
    const std::string etag = Etag();
    if (r.target == "/ds/obj.bin" && r.method == "HEAD") {
      return Reply(200, "", {absl::StrCat("ETag: ", etag)}, kSize);
    }
    if (r.target == "/ds/obj.bin" && r.method == "GET") {
      if (!r.Header("if-match").empty() && r.Header("if-match") != etag) {
        return Reply(412, S3Error("PreconditionFailed", "At least one precondition failed"));
      }
      const std::string header = r.Header("range");
      absl::string_view range = header;
      uint64_t first = 0, last = 0;
      if (!absl::ConsumePrefix(&range, "bytes=") ||
          !absl::SimpleAtoi(range.substr(0, range.find('-')), &first) ||
          !absl::SimpleAtoi(range.substr(range.find('-') + 1), &last) || last >= kSize) {
        return Reply(416, "");
      }
      return Partial(content_.substr(first, last - first + 1), first, last, kSize,
                     {absl::StrCat("ETag: ", etag)});
    }
    if (r.method == "HEAD" &&
        (r.target == "/listed/train.manifest.json" || r.target == "/listed/val.manifest.json")) {
      return Reply(200, "", {"ETag: \"m\""}, 2);
    }
    return Reply(404, S3Error("NoSuchKey", "The specified key does not exist."));
  }
  std::string Etag() {
    std::lock_guard<std::mutex> lock(mu_);
    return etag_;
  }
  void SetEtag(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    etag_ = e;
  }
  int Gets() const {
    int n = 0;
    for (const SeenRequest& r : server_->requests()) n += r.method == "GET";
    return n;
  }

  std::string dir_;
  RemoteOptions saved_;
  std::string content_;
  std::unique_ptr<TestServer> server_;
  std::string url_;
  std::mutex mu_;
  std::string etag_ = "\"v1\"";
};

TEST_F(UrlEnvHttpTest, OpensWithAHeadAndReadsWithIfMatchRangeGets) {
  Env* env = UrlEnv();
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = env->NewRandomAccessFile(url_);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->Size(), kSize);
  EXPECT_EQ((*f)->path(), url_);

  std::string buf(64, '\0');
  absl::StatusOr<size_t> n = (*f)->Read(100, 50, buf.data());
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(*n, 50u);
  EXPECT_EQ(buf.substr(0, 50), content_.substr(100, 50));

  // At the end: the read is cut to the object; past it, nothing is asked.
  n = (*f)->Read(990, 50, buf.data());
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(*n, 10u);
  EXPECT_EQ(buf.substr(0, 10), content_.substr(990, 10));
  const int before = server_->count();
  n = (*f)->Read(kSize, 10, buf.data());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(server_->count(), before);

  const std::vector<SeenRequest> seen = server_->requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "HEAD");
  EXPECT_EQ(seen[1].method, "GET");
  EXPECT_EQ(seen[1].Header("range"), "bytes=100-149");
  EXPECT_EQ(seen[1].Header("if-match"), "\"v1\"");
  EXPECT_EQ(seen[2].Header("range"), "bytes=990-999");

  absl::StatusOr<uint64_t> size = env->GetFileSize(url_);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, kSize);
  EXPECT_TRUE(env->FileExists(url_));
  EXPECT_TRUE(CollectRemoteStats().used);
}

TEST_F(UrlEnvHttpTest, ASecondReadOfARangeComesFromTheCache) {
  Configure(/*cache_bytes=*/1 << 20);
  ResetRemoteStats();
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(url_);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string a(200, '\0'), b(200, '\0');
  ASSERT_EQ(*(*f)->Read(300, 200, a.data()), 200u);
  ASSERT_EQ(Gets(), 1);
  ASSERT_EQ(*(*f)->Read(300, 200, b.data()), 200u);
  EXPECT_EQ(Gets(), 1);  // no second GET
  EXPECT_EQ(a, content_.substr(300, 200));
  EXPECT_EQ(b, a);

  const RemoteReadStats s = CollectRemoteStats();
  EXPECT_TRUE(s.cache_on);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.cache_hit_bytes, 200u);
  EXPECT_EQ(s.requests, 2u);  // the HEAD and one GET
  EXPECT_FALSE(s.cache_writes_off);
  EXPECT_TRUE(fs::exists(dir_ + "/cache/remote/v1"));

  // Another file object on the same object (a later epoch) hits the same entry.
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> again = UrlEnv()->NewRandomAccessFile(url_);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(*(*again)->Read(300, 200, b.data()), 200u);
  EXPECT_EQ(b, a);
  EXPECT_EQ(Gets(), 1);
}

TEST_F(UrlEnvHttpTest, AnObjectReplacedAfterOpeningIsRefused) {
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(url_);
  ASSERT_TRUE(f.ok()) << f.status();
  SetEtag("\"v2\"");
  std::string buf(10, '\0');
  absl::StatusOr<size_t> n = (*f)->Read(0, 10, buf.data());
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(n.status().message()), HasSubstr(url_));
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("\"v1\""));
}

TEST_F(UrlEnvHttpTest, WillReadFetchesAheadAndTheReadUsesIt) {
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(url_);
  ASSERT_TRUE(f.ok()) << f.status();
  (*f)->WillRead(500, 100);
  (*f)->WillRead(500, 100);  // hinted twice: fetched once
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  while (Gets() < 1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(Gets(), 1);
  std::string buf(100, '\0');
  absl::StatusOr<size_t> n = (*f)->Read(500, 100, buf.data());
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(*n, 100u);
  EXPECT_EQ(buf, content_.substr(500, 100));
  EXPECT_EQ(Gets(), 1);
  EXPECT_EQ(server_->requests().back().Header("range"), "bytes=500-599");
}

TEST_F(UrlEnvHttpTest, ARangeFetchedAheadIsCachedAndCountedAsAMiss) {
  Configure(/*cache_bytes=*/1 << 20);
  ResetRemoteStats();
  std::string buf(100, '\0');
  {
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(url_);
    ASSERT_TRUE(f.ok()) << f.status();
    (*f)->WillRead(0, 100);
    ASSERT_EQ(*(*f)->Read(0, 100, buf.data()), 100u);
    EXPECT_EQ(buf, content_.substr(0, 100));
  }
  EXPECT_EQ(Gets(), 1);
  RemoteReadStats s = CollectRemoteStats();
  EXPECT_EQ(s.cache_misses, 1u);
  EXPECT_EQ(s.cache_hits, 0u);
  {
    // A later epoch: the hint finds the range cached and fetches nothing; the read hits.
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(url_);
    ASSERT_TRUE(f.ok()) << f.status();
    (*f)->WillRead(0, 100);
    buf.assign(100, '\0');
    ASSERT_EQ(*(*f)->Read(0, 100, buf.data()), 100u);
    EXPECT_EQ(buf, content_.substr(0, 100));
  }
  EXPECT_EQ(Gets(), 1);
  s = CollectRemoteStats();
  EXPECT_EQ(s.cache_misses, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
}

TEST_F(UrlEnvHttpTest, AMissingObjectIsNotFoundNamingThePath) {
  const std::string missing = server_->Url("/ds/missing.shard");
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> f = UrlEnv()->NewRandomAccessFile(missing);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(missing));
  EXPECT_FALSE(UrlEnv()->FileExists(missing));
}

TEST_F(UrlEnvHttpTest, ChildrenOfAnHttpFolderAreTheManifestsFound) {
  absl::StatusOr<std::vector<std::string>> listed = UrlEnv()->GetChildren(server_->Url("/listed"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, ElementsAre("train.manifest.json", "val.manifest.json"));
  EXPECT_TRUE(UrlEnv()->FileExists(server_->Url("/listed")));

  const std::string empty = server_->Url("/empty");
  absl::StatusOr<std::vector<std::string>> none = UrlEnv()->GetChildren(empty);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr(empty));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("SPLIT.manifest.json"));
}

}  // namespace
}  // namespace sluice::remote
