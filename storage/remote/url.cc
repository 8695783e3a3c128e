#include "storage/remote/url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice::remote {

namespace {
struct Prefix {
  const char* text;
  Scheme scheme;
};
constexpr Prefix kPrefixes[] = {
    {"s3://", Scheme::kS3}, {"https://", Scheme::kHttps}, {"http://", Scheme::kHttp}};
}  // namespace

bool IsRemotePath(absl::string_view path) {
  for (const Prefix& p : kPrefixes) {
    if (absl::StartsWithIgnoreCase(path, p.text)) return true;
  }
  return false;
}

absl::StatusOr<ObjectPath> ParseObjectPath(absl::string_view path) {
  for (const Prefix& p : kPrefixes) {
    if (!absl::StartsWithIgnoreCase(path, p.text)) continue;
    absl::string_view rest = path.substr(absl::string_view(p.text).size());
    auto refuse = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
    };
    {
      // Before anything names the path: a password in it is never printed.
      const absl::string_view authority = rest.substr(0, rest.find('/'));
      if (authority.find('@') != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            p.text, "...@", authority.substr(authority.rfind('@') + 1),
            ": a user or password in the URL is refused (not printed here; it would be in "
            "reports); give credentials through AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a "
            "profile"));
      }
    }
    if (rest.find_first_of("?#") != absl::string_view::npos) {
      return refuse(
          "a query or fragment ('?', '#') is not part of a dataset path; name the object's "
          "path alone");
    }
    const size_t slash = rest.find('/');
    ObjectPath out;
    out.scheme = p.scheme;
    out.bucket = std::string(rest.substr(0, slash));
    out.key = slash == absl::string_view::npos ? "" : std::string(rest.substr(slash + 1));
    if (out.bucket.empty()) {
      return refuse(p.scheme == Scheme::kS3 ? "expected s3://BUCKET/PREFIX"
                                            : "expected a host after the scheme");
    }
    while (absl::EndsWith(out.key, "/")) out.key.pop_back();
    return out;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": expected s3://, https:// or http:// at its start"));
}

std::string UriEncode(absl::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

}  // namespace sluice::remote
