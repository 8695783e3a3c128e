// The S3 settings read as the AWS CLI reads them (storage/remote/aws_config.h): credentials from
// the environment, the shared credentials file or the config file's profile; region, endpoint
// and CA bundle with their precedence; a half-given key pair refused; the URL of an object; and
// Describe(), which never holds a secret. Each test passes its own environment (a map) and
// writes its files in a temporary folder.
#include "storage/remote/aws_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::remote {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKeyId[] = "AKIAEXAMPLEKEYID0001";
constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY";
constexpr char kToken[] = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN";

class AwsConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = absl::StrCat(::testing::TempDir(), "aws_config_XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Never the real ~/.aws of whoever runs the tests.
    env_["HOME"] = dir_ + "/home";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  GetEnvFn GetEnv() const {
    return [this](const char* name) -> std::optional<std::string> {
      auto it = env_.find(name);
      if (it == env_.end()) return std::nullopt;
      return it->second;
    };
  }
  // Writes `text` to dir_/relative (folders made) and returns its path.
  std::string Write(const std::string& relative, const std::string& text) {
    const fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  absl::StatusOr<AwsConfig> Load() const { return LoadAwsConfig(GetEnv()); }

  std::string dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(AwsConfigTest, NothingSetIsAnonymousInUsEast1WithAwsEndpoint) {
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->anonymous());
  EXPECT_EQ(c->access_key, "");
  EXPECT_EQ(c->secret_key, "");
  EXPECT_EQ(c->credentials_from, "");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->endpoint, "");
  EXPECT_EQ(c->ca_bundle, "");
  EXPECT_THAT(c->Describe(), HasSubstr("no credentials"));
  EXPECT_THAT(c->Describe(), HasSubstr("region us-east-1"));
}

TEST_F(AwsConfigTest, CredentialsFromTheEnvironment) {
  env_["AWS_ACCESS_KEY_ID"] = kKeyId;
  env_["AWS_SECRET_ACCESS_KEY"] = kSecret;
  env_["AWS_SESSION_TOKEN"] = kToken;
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->anonymous());
  EXPECT_EQ(c->access_key, kKeyId);
  EXPECT_EQ(c->secret_key, kSecret);
  EXPECT_EQ(c->session_token, kToken);
  EXPECT_THAT(c->credentials_from, HasSubstr("environment"));
}

TEST_F(AwsConfigTest, EnvironmentCredentialsWinOverTheFiles) {
  env_["AWS_ACCESS_KEY_ID"] = kKeyId;
  env_["AWS_SECRET_ACCESS_KEY"] = kSecret;
  env_["AWS_SHARED_CREDENTIALS_FILE"] = Write(
      "creds", "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n");
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key, kKeyId);
  EXPECT_EQ(c->secret_key, kSecret);
  EXPECT_EQ(c->session_token, "");
}

TEST_F(AwsConfigTest, AHalfGivenKeyPairInTheEnvironmentIsRefusedNamingTheVariables) {
  env_["AWS_ACCESS_KEY_ID"] = kKeyId;
  absl::StatusOr<AwsConfig> only_id = Load();
  ASSERT_FALSE(only_id.ok());
  EXPECT_EQ(only_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(only_id.status().message()), HasSubstr("AWS_SECRET_ACCESS_KEY"));
  EXPECT_THAT(std::string(only_id.status().message()), Not(HasSubstr(kKeyId)));

  env_.erase("AWS_ACCESS_KEY_ID");
  env_["AWS_SECRET_ACCESS_KEY"] = kSecret;
  absl::StatusOr<AwsConfig> only_secret = Load();
  ASSERT_FALSE(only_secret.ok());
  EXPECT_EQ(only_secret.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(only_secret.status().message()), HasSubstr("AWS_ACCESS_KEY_ID"));
  EXPECT_THAT(std::string(only_secret.status().message()), Not(HasSubstr(kSecret)));
}

TEST_F(AwsConfigTest, SharedCredentialsFileDefaultProfile) {
  const std::string creds =
      Write("creds",
            "# a comment\n; another\n[other]\naws_access_key_id = OTHERKEY\n"
            "aws_secret_access_key = OTHERSECRET\n\n"
            "[default]\n  AWS_ACCESS_KEY_ID=" +
                std::string(kKeyId) + "  \naws_secret_access_key = " + kSecret +
                "\naws_session_token = " + kToken + "\n");
  env_["AWS_SHARED_CREDENTIALS_FILE"] = creds;
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key, kKeyId);  // names are case-insensitive, values trimmed
  EXPECT_EQ(c->secret_key, kSecret);
  EXPECT_EQ(c->session_token, kToken);
  EXPECT_EQ(c->credentials_from, creds + " [default]");
}

TEST_F(AwsConfigTest, AwsProfileSelectsTheCredentialsSection) {
  env_["AWS_SHARED_CREDENTIALS_FILE"] =
      Write("creds",
            "[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = DEFSECRET\n"
            "[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = DEVSECRET\n");
  env_["AWS_PROFILE"] = "dev";
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key, "DEVKEY");
  EXPECT_EQ(c->secret_key, "DEVSECRET");
  EXPECT_THAT(c->credentials_from, HasSubstr("[dev]"));
}

TEST_F(AwsConfigTest, HomeAwsCredentialsIsTheDefaultCredentialsFile) {
  Write("home/.aws/credentials",
        "[default]\naws_access_key_id = HOMEKEY\naws_secret_access_key = HOMESECRET\n");
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key, "HOMEKEY");
  EXPECT_EQ(c->secret_key, "HOMESECRET");
  EXPECT_THAT(c->credentials_from, HasSubstr(".aws/credentials"));
}

TEST_F(AwsConfigTest, ConfigFileProfileSectionGivesCredentialsWhenTheCredentialsFileHasNone) {
  env_["AWS_SHARED_CREDENTIALS_FILE"] =
      Write("creds", "[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  const std::string config =
      Write("config",
            "[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = DEFSECRET\n"
            "[dev]\naws_access_key_id = NOTAPROFILEKEY\naws_secret_access_key = NOTAPROFILESECRET\n"
            "[profile dev]\naws_access_key_id = CFGKEY\naws_secret_access_key = CFGSECRET\n"
            "aws_session_token = CFGTOKEN\n");
  env_["AWS_CONFIG_FILE"] = config;
  env_["AWS_PROFILE"] = "dev";
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key, "CFGKEY");
  EXPECT_EQ(c->secret_key, "CFGSECRET");
  EXPECT_EQ(c->session_token, "CFGTOKEN");
  EXPECT_EQ(c->credentials_from, config + " [dev]");

  // The default profile is "[default]" in the config file, not "[profile default]".
  env_.erase("AWS_PROFILE");
  absl::StatusOr<AwsConfig> d = Load();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->access_key, "DEFKEY");
}

TEST_F(AwsConfigTest, CredentialsFileWinsOverConfigFile) {
  env_["AWS_SHARED_CREDENTIALS_FILE"] =
      Write("creds", "[default]\naws_access_key_id = CREDKEY\naws_secret_access_key = CREDSEC\n");
  env_["AWS_CONFIG_FILE"] =
      Write("config", "[default]\naws_access_key_id = CFGKEY\naws_secret_access_key = CFGSEC\n");
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key, "CREDKEY");
  EXPECT_EQ(c->secret_key, "CREDSEC");
}

TEST_F(AwsConfigTest, AHalfGivenKeyPairInAFileIsRefusedNamingTheFileAndProfile) {
  const std::string creds =
      Write("creds", "[default]\naws_secret_access_key = " + std::string(kSecret) + "\n");
  env_["AWS_SHARED_CREDENTIALS_FILE"] = creds;
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(creds));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("[default]"));
  EXPECT_THAT(std::string(c.status().message()), Not(HasSubstr(kSecret)));
}

TEST_F(AwsConfigTest, MissingFilesAndMissingProfileAreAnonymous) {
  env_["AWS_SHARED_CREDENTIALS_FILE"] = dir_ + "/no-such-credentials";
  env_["AWS_CONFIG_FILE"] = dir_ + "/no-such-config";
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->anonymous());

  env_["AWS_SHARED_CREDENTIALS_FILE"] =
      Write("creds", "[default]\naws_access_key_id = K\naws_secret_access_key = S\n");
  env_["AWS_PROFILE"] = "absent";
  absl::StatusOr<AwsConfig> absent = Load();
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_TRUE(absent->anonymous());
}

TEST_F(AwsConfigTest, RegionPrecedence) {
  env_["AWS_CONFIG_FILE"] =
      Write("config", "[default]\nregion = eu-central-1\n[profile dev]\nregion = ap-south-1\n");
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->region, "eu-central-1");
  }
  env_["AWS_PROFILE"] = "dev";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->region, "ap-south-1");
  }
  env_["AWS_DEFAULT_REGION"] = "us-west-1";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->region, "us-west-1");
  }
  env_["AWS_REGION"] = "eu-west-3";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->region, "eu-west-3");
  }
}

TEST_F(AwsConfigTest, AnEmptyConfigRegionKeepsUsEast1) {
  env_["AWS_CONFIG_FILE"] = Write("config", "[default]\nregion =\n");
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->region, "us-east-1");
}

TEST_F(AwsConfigTest, EndpointPrecedenceAndTrailingSlashes) {
  env_["AWS_CONFIG_FILE"] =
      Write("config", "[default]\nendpoint_url = https://config.example:9000/\n");
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->endpoint, "https://config.example:9000");
  }
  env_["AWS_ENDPOINT_URL"] = "http://generic.example:9000//";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->endpoint, "http://generic.example:9000");
  }
  env_["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:8080";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->endpoint, "http://127.0.0.1:8080");
  }
}

TEST_F(AwsConfigTest, AnEndpointWithoutHttpSchemeIsRefusedNamingWhereItCameFrom) {
  env_["AWS_ENDPOINT_URL_S3"] = "minio.local:9000";
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("AWS_ENDPOINT_URL_S3"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("minio.local:9000"));

  env_.erase("AWS_ENDPOINT_URL_S3");
  const std::string config = Write("config", "[default]\nendpoint_url = s3.local\n");
  env_["AWS_CONFIG_FILE"] = config;
  absl::StatusOr<AwsConfig> f = Load();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(config));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("endpoint_url"));
}

TEST_F(AwsConfigTest, CaBundlePrecedence) {
  env_["AWS_CONFIG_FILE"] = Write("config", "[default]\nca_bundle = /etc/config-ca.pem\n");
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->ca_bundle, "/etc/config-ca.pem");
    EXPECT_EQ(HttpsCaBundle(GetEnv()), "");  // plain HTTPS does not read the AWS config
  }
  env_["AWS_CA_BUNDLE"] = "/etc/aws-ca.pem";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->ca_bundle, "/etc/aws-ca.pem");
    EXPECT_EQ(HttpsCaBundle(GetEnv()), "/etc/aws-ca.pem");
  }
  env_["SLUICE_CA_BUNDLE"] = "/etc/sluice-ca.pem";
  {
    absl::StatusOr<AwsConfig> c = Load();
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->ca_bundle, "/etc/sluice-ca.pem");
    EXPECT_EQ(HttpsCaBundle(GetEnv()), "/etc/sluice-ca.pem");
  }
}

TEST_F(AwsConfigTest, ObjectUrlIsVirtualHostedForAwsAndPathStyleForACustomEndpoint) {
  AwsConfig aws;
  aws.region = "eu-west-1";
  EXPECT_EQ(aws.ObjectUrl("my-bucket", "data/train 00.shard"),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/data/train%2000.shard");
  EXPECT_EQ(aws.ObjectUrl("my-bucket", "a+b/c=d"),
            "https://my-bucket.s3.eu-west-1.amazonaws.com/a%2Bb/c%3Dd");
  EXPECT_EQ(aws.ObjectUrl("my-bucket", ""), "https://my-bucket.s3.eu-west-1.amazonaws.com/");

  AwsConfig minio;
  minio.endpoint = "http://127.0.0.1:9000";
  EXPECT_EQ(minio.ObjectUrl("bucket", "dir/x y.shard"),
            "http://127.0.0.1:9000/bucket/dir/x%20y.shard");
  EXPECT_EQ(minio.ObjectUrl("bucket", "\xc3\xa9"), "http://127.0.0.1:9000/bucket/%C3%A9");
}

TEST_F(AwsConfigTest, DescribeNamesRegionEndpointAndSourceButNoSecret) {
  env_["AWS_ACCESS_KEY_ID"] = kKeyId;
  env_["AWS_SECRET_ACCESS_KEY"] = kSecret;
  env_["AWS_SESSION_TOKEN"] = kToken;
  env_["AWS_REGION"] = "eu-west-1";
  env_["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:8080";
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string d = c->Describe();
  EXPECT_THAT(d, HasSubstr("region eu-west-1"));
  EXPECT_THAT(d, HasSubstr("http://127.0.0.1:8080 (path-style)"));
  EXPECT_THAT(d, HasSubstr("credentials from the environment"));
  EXPECT_THAT(d, Not(HasSubstr(kSecret)));
  EXPECT_THAT(d, Not(HasSubstr(kToken)));
  EXPECT_THAT(d, Not(HasSubstr(kKeyId)));
}

TEST_F(AwsConfigTest, DescribeOfFileCredentialsNamesTheFileButNoSecret) {
  const std::string creds = Write("creds", absl::StrCat("[default]\naws_access_key_id = ", kKeyId,
                                                        "\naws_secret_access_key = ", kSecret,
                                                        "\naws_session_token = ", kToken, "\n"));
  env_["AWS_SHARED_CREDENTIALS_FILE"] = creds;
  absl::StatusOr<AwsConfig> c = Load();
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string d = c->Describe();
  EXPECT_THAT(d, HasSubstr(creds));
  EXPECT_THAT(d, HasSubstr("s3.us-east-1.amazonaws.com"));
  EXPECT_THAT(d, Not(HasSubstr(kSecret)));
  EXPECT_THAT(d, Not(HasSubstr(kToken)));
  EXPECT_THAT(d, Not(HasSubstr(kKeyId)));
}

}  // namespace
}  // namespace sluice::remote
