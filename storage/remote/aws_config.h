// The S3 settings a user already has (docs/storage.md, "Credentials and endpoint"), read the way
// the AWS CLI and SDKs read them:
//   credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
//     profile's entries in the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
//     ~/.aws/credentials), else the config file's profile section; none at all means anonymous
//     requests (a public bucket), sent unsigned;
//   profile: $AWS_PROFILE, else "default";
//   region: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's `region` in the config file
//     ($AWS_CONFIG_FILE, else ~/.aws/config), else us-east-1;
//   endpoint: AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else the profile's `endpoint_url`,
//     else AWS's own (https://s3.REGION.amazonaws.com, virtual-hosted-style addressing); a
//     custom endpoint is addressed path-style (ENDPOINT/BUCKET/KEY);
//   CA bundle: SLUICE_CA_BUNDLE, else AWS_CA_BUNDLE, else the profile's `ca_bundle`, else the
//     system's (HTTPS to any host, S3 or not, uses it).
//
// Secrets are held here and given to libcurl only: no function prints them, and
// Describe() names where each setting came from without its value.
// Errors: kInvalidArgument for a half-given key pair or a malformed endpoint, naming the
// variable or file.
// Thread safety: AwsConfig is a plain value.
#ifndef SLUICE_STORAGE_REMOTE_AWS_CONFIG_H_
#define SLUICE_STORAGE_REMOTE_AWS_CONFIG_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::remote {

struct AwsConfig {
  std::string access_key;  // empty: anonymous
  std::string secret_key;
  std::string session_token;
  std::string region = "us-east-1";
  std::string endpoint;          // "scheme://host[:port]" without a trailing '/'; empty: AWS's
  std::string ca_bundle;         // a PEM file; empty: the system's
  std::string credentials_from;  // "environment", "<file> [profile]", or "" (anonymous)

  bool anonymous() const { return access_key.empty(); }
  // The URL of a request for `key` in `bucket` (key unencoded; it is encoded here).
  std::string ObjectUrl(absl::string_view bucket, absl::string_view key) const;
  // "region us-east-1, endpoint http://127.0.0.1:8080 (path-style), credentials from the
  // environment": for messages; never a secret.
  std::string Describe() const;
};

// `getenv` looks variables up (std::getenv by default; tests pass their own).
using GetEnvFn = std::function<std::optional<std::string>(const char*)>;
absl::StatusOr<AwsConfig> LoadAwsConfig(const GetEnvFn& getenv = {});

// The CA bundle for HTTPS to a plain https:// host (not S3): SLUICE_CA_BUNDLE, else
// AWS_CA_BUNDLE, else "" (the system's).
std::string HttpsCaBundle(const GetEnvFn& getenv = {});

}  // namespace sluice::remote

#endif  // SLUICE_STORAGE_REMOTE_AWS_CONFIG_H_
