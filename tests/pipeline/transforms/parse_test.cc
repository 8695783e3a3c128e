#include "pipeline/transforms/parse.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transforms/registry.h"

namespace sluice {
namespace {
using ::testing::HasSubstr;

std::string ErrorOf(const std::string& text) {
  auto ops = ParseTransforms(text);
  EXPECT_FALSE(ops.ok()) << text;
  return ops.ok() ? "" : std::string(ops.status().message());
}

TEST(ParseTransforms, ReadsTheDocumentedExample) {
  auto ops = ParseTransforms(
      "RandomCrop(32, padding=4, padding_mode=reflect), RandomHorizontalFlip(),\n"
      "  Normalize(mean=[0.49,0.48,0.45], std=[0.25,0.24,0.26]), ToDtype(dtype='f16')");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 4u);
  EXPECT_EQ((*ops)[1]->Identity(), "RandomHorizontalFlip(p=0.5)");
  EXPECT_EQ((*ops)[3]->Identity(), "ToDtype(dtype=f16)");
}

TEST(ParseTransforms, AnEmptyTextIsAnEmptyChain) {
  EXPECT_TRUE(ParseTransforms("")->empty());
  EXPECT_TRUE(ParseTransforms(" \t")->empty());
}

TEST(ParseTransforms, UnknownOpListsTheKnownOnesWithTheCharacter) {
  // The expected list is every registered op, sorted here by name (the order registry.h
  // documents) rather than taken from RegisteredTransformNames(): the message fails this test
  // if it leaves an op out or lists them in another order, even if the registry's own array
  // were out of order.
  std::vector<std::string> names;
  for (const TransformInfo& info : RegisteredTransforms()) names.emplace_back(info.name);
  ASSERT_GE(names.size(), 2u);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(ErrorOf("CenterCrop(4), RandomCrap(32)"),
            "at character 16 ('RandomCrap(32)'): unknown transform 'RandomCrap'; known: " +
                absl::StrJoin(names, ", "));
}

TEST(ParseTransforms, UnknownNameWithALookAlikeLetterIsShownWhole) {
  // A Cyrillic 'о' (U+043E) ended the name early: "unknown transform 'RandomCr'".
  const std::string error = ErrorOf("RandomCr\xd0\xbep(32)");
  EXPECT_THAT(error, HasSubstr("unknown transform 'RandomCr\xd0\xbep' (it holds a character "
                               "that is not ASCII)"));
  EXPECT_THAT(ErrorOf("RandomCr\xbep(32)"), HasSubstr("unknown transform 'RandomCr\\xbep'"));
}

TEST(ParseTransforms, UnknownArgumentListsTheOpsArguments) {
  EXPECT_THAT(ErrorOf("RandomCrop(32, pading=4)"),
              HasSubstr("character 16 ('pading=4)'): RandomCrop has no argument 'pading'; its "
                        "arguments: size, padding, pad_if_needed, fill, padding_mode"));
}

TEST(ParseTransforms, BadNumberIsShownAsWritten) {
  EXPECT_THAT(
      ErrorOf("RandomCrop(3x2)"),
      HasSubstr("at character 12 ('3x2)'): expected a number, a name or a list, got '3x2'"));
  EXPECT_THAT(ErrorOf("Normalize(mean=[0.5, 0..4], std=1)"), HasSubstr("got '0..4'"));
}

TEST(ParseTransforms, ANumberThatUnderflowsIsZeroAsPythonReadsIt) {
  // "RandomHorizontalFlip(p=1e-400)" said "expected a number" while sluice.transforms, reading
  // the float 1e-400 as 0.0, passed "p=0.0" and was accepted.
  auto ops = ParseTransforms("RandomHorizontalFlip(p=1e-400)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ((*ops)[0]->Identity(), "RandomHorizontalFlip(p=0)");
  auto negative = ParseTransforms("RandomHorizontalFlip(p=-1e-400)");
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_THAT(ErrorOf("RandomCrop(32, padding=1e309)"), HasSubstr("got '1e309'"));
}

TEST(ParseTransforms, MissingBracketsPointAtTheOpening) {
  EXPECT_THAT(ErrorOf("Normalize(mean=[0.5, 0.4, std=[1])"),
              HasSubstr("at character 30 ('=[1])'): expected ',' or ']' in the list opened at "
                        "character 16"));
  EXPECT_THAT(ErrorOf("Normalize(mean=[0.5, 0.4"),
              HasSubstr("at character 16 ('[0.5, 0.4'): missing ']' to close this '['"));
  EXPECT_THAT(ErrorOf("RandomCrop(32"),
              HasSubstr("at character 11 ('(32'): missing ')' to close 'RandomCrop('"));
  EXPECT_THAT(ErrorOf("RandomHorizontalFlip"),
              HasSubstr("expected '(' after 'RandomHorizontalFlip'"));
}

TEST(ParseTransforms, ArgumentsBindLikePython) {
  EXPECT_THAT(ErrorOf("RandomCrop(padding=4, 32)"),
              HasSubstr("positional argument follows keyword argument"));
  EXPECT_THAT(ErrorOf("RandomHorizontalFlip(0.5, 1)"),
              HasSubstr("RandomHorizontalFlip takes at most 1 arguments (p)"));
  EXPECT_THAT(ErrorOf("CenterCrop(4, size=4)"), HasSubstr("argument 'size' given twice"));
  EXPECT_THAT(ErrorOf("Normalize(std=[1])"),
              HasSubstr("Normalize (character 1): missing argument 'mean'"));
}

TEST(ParseTransforms, ValuesOfTheWrongFormNameTheArgumentAndItsPlace) {
  EXPECT_THAT(ErrorOf("RandomCrop(32, padding=[1, 2, 3])"),
              HasSubstr("RandomCrop argument 'padding' (character 24): expected a non-negative "
                        "integer or a list of 2 non-negative integers or a list of 4 "
                        "non-negative integers, got '[1, 2, 3]'"));
  EXPECT_THAT(ErrorOf("RandomCrop(32, padding_mode=wrap)"),
              HasSubstr("expected constant, edge, reflect or symmetric, got 'wrap'"));
  EXPECT_THAT(ErrorOf("RandomCrop(32, pad_if_needed=1)"), HasSubstr("expected True or False"));
}

TEST(ParseTransforms, SeparatorsBetweenOpsAreChecked) {
  EXPECT_THAT(ErrorOf("CenterCrop(4) CenterCrop(2)"),
              HasSubstr("at character 15 ('CenterCrop(2)'): expected ',' between transforms"));
  EXPECT_THAT(ErrorOf("CenterCrop(4),"), HasSubstr("expected a transform after ','"));
}

// A 4 MB list took 18 s and 3.3 GB and printed a 10 MB error line: it is refused before it is
// parsed, in one short line naming the bound.
TEST(ParseTransforms, AListOverTheByteBoundIsRefusedAtOnceInOneShortLine) {
  std::string text;
  while (text.size() < (4u << 20)) text += "RandomHorizontalFlip(), ";
  const auto start = std::chrono::steady_clock::now();
  const std::string error = ErrorOf(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.5);
  EXPECT_THAT(error, HasSubstr(absl::StrCat("the transform list is ", text.size(),
                                            " bytes, more than the maximum 65536")));
  EXPECT_LT(error.size(), 300u) << error;
  // At the bound itself the text is parsed (and refused here for its op count).
  EXPECT_THAT(ErrorOf(std::string(kMaxTransformsTextBytes, ' ') + "X()"), HasSubstr("bytes"));
  EXPECT_THAT(ErrorOf(std::string(kMaxTransformsTextBytes - 3, ' ') + "X()"),
              HasSubstr("unknown transform 'X'"));
}

TEST(ParseTransforms, AChainOfMoreThanTheMostOpsIsRefusedNamingTheBound) {
  std::vector<std::string> ops(kMaxTransformOps, "RandomHorizontalFlip()");
  auto chain = ParseTransforms(absl::StrJoin(ops, ", "));
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->size(), kMaxTransformOps);
  ops.push_back("CenterCrop(4)");
  EXPECT_THAT(ErrorOf(absl::StrJoin(ops, ", ")),
              HasSubstr("('CenterCrop(4)'): more than 64 transforms, the most a chain may have"));
}

// A 1 MB argument name, a long mode= string and a bad number were echoed whole, and an ANSI
// escape in them reached the terminal raw: each is escaped and cut at 200 characters.
TEST(ParseTransforms, QuotedUserTextIsEscapedAndBounded) {
  const std::string long_name(60000, 'k');
  for (const std::string& text :
       {absl::StrCat("RandomCrop(32, ", long_name, "=1)"),
        absl::StrCat("DecodeImage(mode='", long_name, "')"),
        absl::StrCat("RandomCrop(32, padding_mode='", long_name, "')"),
        absl::StrCat("ToDtype(dtype=", long_name, ")"),
        absl::StrCat("RandomCrop(", std::string(60000, '7'), "x)"), absl::StrCat(long_name, "()"),
        absl::StrCat("CenterCrop(4),", std::string(60000, ' '))}) {
    // The user's text is cut; the rest is ours (an unknown op's error lists every known one).
    const std::string error = ErrorOf(text);
    const size_t bound = 600 + RegisteredTransformNames().size();
    EXPECT_LT(error.size(), bound) << error.substr(0, bound);
    EXPECT_THAT(error, HasSubstr("... (60")) << error.substr(0, bound);
  }
  EXPECT_THAT(ErrorOf("RandomCrop(32, \x1b[31mred=1)"),
              HasSubstr("expected a number, a name or a list, got '\\x1b[31mred=1'"));
  EXPECT_THAT(ErrorOf("DecodeImage(mode='\x1b[2Jgone')"), HasSubstr("got '\\x1b[2Jgone'"));
  const std::string with_escape = ErrorOf("DecodeImage(mode='\x1b[2J\x07')");
  EXPECT_EQ(with_escape.find('\x1b'), std::string::npos) << with_escape;
  EXPECT_THAT(with_escape, HasSubstr("got '\\x1b[2J\\x07'"));
  EXPECT_THAT(ErrorOf("X\x1b[31m()"), HasSubstr("unknown transform 'X'"));
}

TEST(ParseTransforms, EveryRegisteredOpHasAUniqueNameAndParameters) {
  for (const TransformInfo& info : RegisteredTransforms()) {
    EXPECT_EQ(FindTransform(info.name), &info);
    EXPECT_FALSE(info.params.empty()) << info.name;
  }
}

// docs/transforms.md's op table (section "The ops") has a row for every registered op, so the
// doc cannot fall behind the registry. A row is "| `Name` | ...": its first cell's first
// backquoted word. The table may have more rows (ToTensor, which only Python folds away).
TEST(ParseTransforms, EveryRegisteredOpHasARowInTheDocsOpTable) {
  const std::string path = std::string(SLUICE_SOURCE_DIR) + "/docs/transforms.md";
  std::ifstream doc(path);
  ASSERT_TRUE(doc.good()) << path;
  std::set<std::string> rows;
  bool in_section = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## The ops";
      continue;
    }
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) rows.insert(line.substr(3, end - 3));
  }
  ASSERT_FALSE(rows.empty()) << path << " has no section \"## The ops\" with a table of ops";
  for (const TransformInfo& info : RegisteredTransforms()) {
    EXPECT_TRUE(rows.count(std::string(info.name)))
        << "registered op " << info.name << " has no row in the op table of " << path
        << " (section \"The ops\"): add \"| `" << info.name << "` | arguments | input → output | "
        << "semantics |\"";
  }
}

}  // namespace
}  // namespace sluice
