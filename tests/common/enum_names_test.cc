#include "common/enum_names.h"

#include "gtest/gtest.h"

namespace sluice {
namespace {

enum class Color { kRed, kGreen, kBlue, kUnnamed };

constexpr auto kColorNames = MakeEnumNames<Color>(
    {{Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"}, {Color::kRed, "r"}});

static_assert(kColorNames.Name(Color::kGreen) == "green");  // usable at compile time

TEST(EnumNamesTest, NameGivesTheFirstEntryOfAValue) {
  EXPECT_EQ(kColorNames.Name(Color::kRed), "red");
  EXPECT_EQ(kColorNames.Name(Color::kBlue), "blue");
  EXPECT_EQ(kColorNames.Name(Color::kUnnamed), "?");
}

TEST(EnumNamesTest, ParseAcceptsEveryEntryAndRejectsOthers) {
  EXPECT_EQ(kColorNames.Parse("green"), Color::kGreen);
  EXPECT_EQ(kColorNames.Parse("r"), Color::kRed);  // alias
  EXPECT_EQ(kColorNames.Parse("red"), Color::kRed);
  EXPECT_EQ(kColorNames.Parse("Red"), std::nullopt);
  EXPECT_EQ(kColorNames.Parse(""), std::nullopt);
}

TEST(EnumNamesTest, ListShowsEachValueOnce) {
  EXPECT_EQ(kColorNames.List(), "red, green or blue");
  EXPECT_EQ(kColorNames.List(", "), "red, green, blue");
  constexpr auto kOne = MakeEnumNames<Color>({{Color::kRed, "red"}});
  EXPECT_EQ(kOne.List(), "red");
  constexpr auto kTwo = MakeEnumNames<Color>({{Color::kRed, "red"}, {Color::kBlue, "blue"}});
  EXPECT_EQ(kTwo.List(), "red or blue");
}

}  // namespace
}  // namespace sluice
