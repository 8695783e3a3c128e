// CheckJsonNesting (common/json_depth.h): a bound on nesting found before a parser recurses.
#include "common/json_depth.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(JsonDepthTest, NestingUpToTheBoundPassesAndOneLevelMoreIsRefusedNamingTheByte) {
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(CheckJsonNesting(ok, "m.json").ok());
  const std::string deep = "{\"a\": " + std::string(65, '[');
  const absl::Status s = CheckJsonNesting(deep, "m.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("m.json: JSON nested deeper than 64 levels at byte 69"));
}

TEST(JsonDepthTest, BracketsInsideStringsAndEscapedQuotesAreNotNesting) {
  const std::string text =
      "{\"k\": \"" + std::string(200, '[') + "\\\"" + std::string(200, '{') + "\", \"l\": [[1]]}";
  EXPECT_TRUE(CheckJsonNesting(text, "m.json").ok());
}

}  // namespace
}  // namespace sluice
