#include "common/printable.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(Printable, PlainTextIsUnchanged) {
  EXPECT_EQ(Printable("img/cat 01.jpg"), "img/cat 01.jpg");
  EXPECT_EQ(Printable("café/ñandú.png"), "café/ñandú.png");
}

TEST(Printable, AnsiEscapesReachTheTerminalAsText) {
  EXPECT_EQ(Printable("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(Printable("a\u009bb"), "a\\x9bb");  // C1 CSI in UTF-8
}

TEST(Printable, NulNewlineAndBackslashAreEscapedNotCutOrSplit) {
  EXPECT_EQ(Printable(std::string("a\0b\nc\\d", 7)), "a\\x00b\\x0ac\\\\d");
}

TEST(Printable, InvalidUtf8AndInvisibleCharactersAreShown) {
  EXPECT_EQ(Printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(Printable("\xef\xbb\xbfpath.jpg"), "\\u{feff}path.jpg");  // a UTF-8 BOM
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");                      // an overlong '/'
  EXPECT_EQ(Printable("x\xe2\x80\xaey"), "x\\u{202e}y");               // right-to-left override
}

TEST(Printable, LongTextIsCutAndItsLengthGiven) {
  const std::string big(10'000'000, 'a');
  const std::string p = Printable(big);
  EXPECT_EQ(p, std::string(kMaxEchoChars, 'a') + "... (10000000 bytes)");
  // Cut at a character boundary: no half of a two-byte character.
  const std::string accents = std::string(199, 'a') + "é" + "tail";
  EXPECT_EQ(Printable(accents), std::string(199, 'a') + "é... (205 bytes)");
}

TEST(Printable, QuotedAddsQuotes) { EXPECT_EQ(QuotedPrintable("a\tb"), "\"a\\x09b\""); }

}  // namespace
}  // namespace sluice
