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
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");                     // an overlong '/'
  EXPECT_EQ(Printable("x\xe2\x80\xaey"), "x\\u{202e}y");              // right-to-left override
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

// The last guard on a whole error line: a file name a library did not escape is escaped,
// while text that Printable escaped already is not escaped twice.
TEST(TerminalSafe, EscapesControlsButNotBackslashesAndCutsOnlyVeryLongMessages) {
  const std::string message = "/data/\x1b[31mred.jpg: cannot open; transform " + Printable(
                                                                                     "a\x1b"
                                                                                     "b");
  EXPECT_EQ(TerminalSafe(message), "/data/\\x1b[31mred.jpg: cannot open; transform a\\x1bb");
  EXPECT_EQ(TerminalSafe(std::string(3000, 'x')), std::string(3000, 'x'));
  const std::string cut = TerminalSafe(std::string(1 << 20, 'x') + ": File name too long");
  EXPECT_LT(cut.size(), kMaxMessageChars);
  EXPECT_NE(cut.find("x ... (1048596 bytes) ... x"), std::string::npos) << cut;
  EXPECT_NE(cut.find(": File name too long"), std::string::npos);
  // Never inside a UTF-8 character.
  const std::string accents = TerminalSafe(std::string(3000, 'e') + [] {
    std::string s;
    for (int i = 0; i < 3000; ++i) s += "\xe2\x82\xac";  // a euro sign: 3 bytes
    return s;
  }());
  EXPECT_EQ(Printable(accents, accents.size() + 1), accents);
}

}  // namespace
}  // namespace sluice
