// Remote dataset paths (docs/storage.md, "URL forms"): s3://bucket/key, https://host/path and
// http://host/path, and how each becomes the URL of an HTTP request.
//
// Errors: kInvalidArgument naming the path and what was expected.
// Thread safety: stateless functions.
#ifndef SLUICE_STORAGE_REMOTE_URL_H_
#define SLUICE_STORAGE_REMOTE_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::remote {

enum class Scheme { kS3, kHttp, kHttps };

// Whether `path` names an object in a store rather than a local file: it starts with "s3://",
// "http://" or "https://" (case-insensitive scheme).
bool IsRemotePath(absl::string_view path);

struct ObjectPath {
  Scheme scheme = Scheme::kHttps;
  // s3: the bucket and the key ("" for the bucket itself). http(s): the authority
  // ("host[:port]") and the path without its leading '/'.
  std::string bucket;
  std::string key;
};

// Splits a remote path. A query ("?") or fragment ("#"), a user in the authority ("user@host")
// and an empty bucket or host are refused: credentials never travel in a path, which reports
// print.
absl::StatusOr<ObjectPath> ParseObjectPath(absl::string_view path);

// RFC 3986 percent-encoding as S3's Signature V4 canonical URI wants it: every byte but
// A-Z a-z 0-9 '-' '.' '_' '~' becomes %XX (upper-case hex); '/' is kept when `keep_slash`.
std::string UriEncode(absl::string_view s, bool keep_slash);

}  // namespace sluice::remote

#endif  // SLUICE_STORAGE_REMOTE_URL_H_
