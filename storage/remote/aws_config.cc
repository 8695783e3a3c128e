#include "storage/remote/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "storage/remote/url.h"

namespace sluice::remote {
namespace {

std::optional<std::string> RealGetEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// The key = value entries of section `section` of an INI file (AWS's shared files); empty when
// the file or the section is missing.
std::map<std::string, std::string> ReadSection(const std::string& file,
                                               const std::string& section) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  if (!in) return out;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l.front() == '[' && l.back() == ']') {
      inside = absl::StripAsciiWhitespace(l.substr(1, l.size() - 2)) == section;
      continue;
    }
    if (!inside) continue;
    const size_t eq = l.find('=');
    if (eq == absl::string_view::npos) continue;
    out[absl::AsciiStrToLower(absl::StripAsciiWhitespace(l.substr(0, eq)))] =
        std::string(absl::StripAsciiWhitespace(l.substr(eq + 1)));
  }
  return out;
}

std::string HomeFile(const GetEnvFn& getenv, const char* var, const char* under_home) {
  if (std::optional<std::string> v = getenv(var)) return *v;
  std::optional<std::string> home = getenv("HOME");
  return home ? absl::StrCat(*home, "/", under_home) : "";
}

}  // namespace

std::string AwsConfig::ObjectUrl(absl::string_view bucket, absl::string_view key) const {
  const std::string path = UriEncode(key, /*keep_slash=*/true);
  if (endpoint.empty()) {
    return absl::StrCat("https://", bucket, ".s3.", region, ".amazonaws.com/", path);
  }
  return absl::StrCat(endpoint, "/", UriEncode(bucket, false), "/", path);
}

std::string AwsConfig::Describe() const {
  return absl::StrCat("region ", region, ", endpoint ",
                      endpoint.empty() ? absl::StrCat("s3.", region, ".amazonaws.com")
                                       : absl::StrCat(endpoint, " (path-style)"),
                      ", ",
                      anonymous() ? std::string("no credentials (unsigned requests)")
                                  : absl::StrCat("credentials from ", credentials_from));
}

absl::StatusOr<AwsConfig> LoadAwsConfig(const GetEnvFn& getenv_in) {
  const GetEnvFn getenv = getenv_in ? getenv_in : GetEnvFn(RealGetEnv);
  AwsConfig c;
  const std::string profile = getenv("AWS_PROFILE").value_or("default");
  const std::string config_file = HomeFile(getenv, "AWS_CONFIG_FILE", ".aws/config");
  const std::string creds_file =
      HomeFile(getenv, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  // The config file names profiles "[profile NAME]", except "[default]".
  const std::map<std::string, std::string> conf =
      ReadSection(config_file, profile == "default" ? profile : absl::StrCat("profile ", profile));

  std::optional<std::string> key = getenv("AWS_ACCESS_KEY_ID");
  std::optional<std::string> secret = getenv("AWS_SECRET_ACCESS_KEY");
  if (key.has_value() != secret.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key ? "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"
                         : "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not",
                     ": set both, or neither to use a profile"));
  }
  if (key) {
    c.access_key = *key;
    c.secret_key = *secret;
    c.session_token = getenv("AWS_SESSION_TOKEN").value_or("");
    c.credentials_from = "the environment (AWS_ACCESS_KEY_ID)";
  } else {
    for (const auto& [file, entries] :
         {std::make_pair(creds_file, ReadSection(creds_file, profile)),
          std::make_pair(config_file, conf)}) {
      auto k = entries.find("aws_access_key_id");
      auto s = entries.find("aws_secret_access_key");
      if (k == entries.end() && s == entries.end()) continue;
      if (k == entries.end() || s == entries.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": profile [", profile,
            "] has only one of aws_access_key_id and aws_secret_access_key; give both"));
      }
      c.access_key = k->second;
      c.secret_key = s->second;
      if (auto t = entries.find("aws_session_token"); t != entries.end()) {
        c.session_token = t->second;
      }
      c.credentials_from = absl::StrCat(file, " [", profile, "]");
      break;
    }
  }
  if (auto r = getenv("AWS_REGION")) {
    c.region = *r;
  } else if (auto dr = getenv("AWS_DEFAULT_REGION")) {
    c.region = *dr;
  } else if (auto cr = conf.find("region"); cr != conf.end() && !cr->second.empty()) {
    c.region = cr->second;
  }
  std::string endpoint_from;
  for (const char* var : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}) {
    if (auto e = getenv(var)) {
      c.endpoint = *e;
      endpoint_from = var;
      break;
    }
  }
  if (c.endpoint.empty()) {
    if (auto e = conf.find("endpoint_url"); e != conf.end()) {
      c.endpoint = e->second;
      endpoint_from = absl::StrCat(config_file, " [", profile, "] endpoint_url");
    }
  }
  while (absl::EndsWith(c.endpoint, "/")) c.endpoint.pop_back();
  if (!c.endpoint.empty() && !absl::StartsWithIgnoreCase(c.endpoint, "http://") &&
      !absl::StartsWithIgnoreCase(c.endpoint, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(endpoint_from, " \"", c.endpoint,
                                                   "\": expected http://HOST[:PORT] or "
                                                   "https://HOST[:PORT]"));
  }
  c.ca_bundle = HttpsCaBundle(getenv);
  if (c.ca_bundle.empty()) {
    if (auto b = conf.find("ca_bundle"); b != conf.end()) c.ca_bundle = b->second;
  }
  return c;
}

std::string HttpsCaBundle(const GetEnvFn& getenv_in) {
  const GetEnvFn getenv = getenv_in ? getenv_in : GetEnvFn(RealGetEnv);
  if (auto b = getenv("SLUICE_CA_BUNDLE")) return *b;
  return getenv("AWS_CA_BUNDLE").value_or("");
}

}  // namespace sluice::remote
