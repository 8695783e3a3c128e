#include "pipeline/transforms/parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/printable.h"
#include "common/status_macros.h"
#include "pipeline/transforms/decode_image.h"
#include "pipeline/transforms/registry.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {
namespace {
constexpr int kMaxListDepth = 8;
constexpr int kMaxOpDepth = 4;  // RandomApply([RandomChoice([...])]) and a little more

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::vector<std::unique_ptr<Transform>>> Chain() {
    std::vector<std::unique_ptr<Transform>> ops;
    SkipSpace();
    while (pos_ < text_.size()) {
      if (ops.size() == kMaxTransformOps) {
        return Error(pos_, absl::StrCat("more than ", kMaxTransformOps,
                                        " transforms, the most a chain may have"));
      }
      ASSIGN_OR_RETURN(std::unique_ptr<Transform> op, Op());
      ops.push_back(std::move(op));
      SkipSpace();
      if (pos_ == text_.size()) break;
      if (!Accept(',')) return Error(pos_, "expected ',' between transforms or the end");
      SkipSpace();
      if (pos_ == text_.size()) return Error(pos_, "expected a transform after ','");
    }
    return ops;
  }

 private:
  // `what` quotes the text only through Printable (escaped, at most 200 characters).
  absl::Status Error(size_t at, absl::string_view what) const {
    if (at >= text_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("at the end of '", Printable(text_), "': ", what));
    }
    return absl::InvalidArgumentError(absl::StrCat("at character ", at + 1, " ('",
                                                   Printable(text_.substr(at, 24)), "'): ", what));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Accept(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  absl::string_view Name() {
    const size_t start = pos_;
    if (pos_ < text_.size() && IsNameStart(text_[pos_])) {
      while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

  absl::StatusOr<std::unique_ptr<Transform>> Op() {
    const size_t start = pos_;
    // Nested ops count too: a list of thousands inside one RandomApply is refused at once.
    if (++ops_seen_ > kMaxTransformOps) {
      return Error(start, absl::StrCat("more than ", kMaxTransformOps,
                                       " transforms, the most a chain may have"));
    }
    const absl::string_view name = Name();
    if (name.empty()) return Error(start, "expected a transform name");
    const TransformInfo* info = FindTransform(name);
    if (info == nullptr) {
      // The whole name as written: a look-alike letter (a Cyrillic 'о' in "RandomCrоp") ends
      // Name() early, and the message would show only "RandomCr".
      size_t end = pos_;
      while (end < text_.size() && (IsNameChar(text_[end]) || (text_[end] & 0x80) != 0)) ++end;
      const absl::string_view written = text_.substr(start, end - start);
      const bool ascii =
          std::none_of(written.begin(), written.end(), [](char c) { return (c & 0x80) != 0; });
      return Error(start, absl::StrCat("unknown transform '", Printable(written), "'",
                                       ascii ? "" : " (it holds a character that is not ASCII)",
                                       "; known: ", RegisteredTransformNames()));
    }
    SkipSpace();
    const size_t open = pos_;
    if (!Accept('(')) return Error(pos_, absl::StrCat("expected '(' after '", name, "'"));
    std::vector<std::pair<std::string, TransformArgValue>> values;
    SkipSpace();
    bool keyword_seen = false;
    while (!Accept(')')) {
      if (pos_ == text_.size()) {
        return Error(open, absl::StrCat("missing ')' to close '", name, "('"));
      }
      ASSIGN_OR_RETURN(auto arg, Arg(*info, values.size(), keyword_seen));
      for (const auto& [key, unused] : values) {
        if (key == arg.first) {
          return Error(arg.second.position - 1,
                       absl::StrCat(name, " argument '", key, "' given twice"));
        }
      }
      values.push_back(std::move(arg));
      SkipSpace();
      if (Accept(')')) break;
      if (pos_ == text_.size()) {
        return Error(open, absl::StrCat("missing ')' to close '", name, "('"));
      }
      if (!Accept(',')) return Error(pos_, absl::StrCat("expected ',' or ')' in ", name, "(...)"));
      SkipSpace();
    }
    return info->from_args(TransformArgs(std::string(name), start + 1, std::move(values)));
  }

  // One argument, bound to its parameter name.
  absl::StatusOr<std::pair<std::string, TransformArgValue>> Arg(const TransformInfo& info,
                                                                size_t index, bool& keyword_seen) {
    const size_t start = pos_;
    const absl::string_view key = Name();
    SkipSpace();
    if (!key.empty() && Accept('=')) {
      bool known = false;
      for (absl::string_view p : info.params) known = known || p == key;
      if (!known) {
        return Error(start, absl::StrCat(info.name, " has no argument '", Printable(key),
                                         "'; its arguments: ", absl::StrJoin(info.params, ", ")));
      }
      keyword_seen = true;
      SkipSpace();
      ASSIGN_OR_RETURN(TransformArgValue value, Value(0));
      return std::make_pair(std::string(key), std::move(value));
    }
    pos_ = start;
    if (keyword_seen) return Error(start, "positional argument follows keyword argument");
    if (index >= info.params.size()) {
      return Error(start, absl::StrCat(info.name, " takes at most ", info.params.size(),
                                       " arguments (", absl::StrJoin(info.params, ", "), ")"));
    }
    ASSIGN_OR_RETURN(TransformArgValue value, Value(0));
    return std::make_pair(std::string(info.params[index]), std::move(value));
  }

  absl::StatusOr<TransformArgValue> Value(int depth) {
    TransformArgValue v;
    v.position = pos_ + 1;
    if (pos_ == text_.size()) return Error(pos_, "expected a value");
    const char c = text_[pos_];
    if (c == '[' || c == '(') return List(depth);
    if (c == '\'' || c == '"') {
      const size_t close = text_.find(c, pos_ + 1);
      if (close == absl::string_view::npos) return Error(pos_, "missing the closing quote");
      v.kind = TransformArgValue::Kind::kName;
      v.text = std::string(text_.substr(pos_ + 1, close - pos_ - 1));
      pos_ = close + 1;
      return v;
    }
    if (IsNameStart(c)) {
      const size_t start = pos_;
      v.kind = TransformArgValue::Kind::kName;
      v.text = std::string(Name());
      const size_t after = pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '(') {  // an op: RandomApply's transforms
        pos_ = start;
        if (op_depth_ >= kMaxOpDepth) return Error(start, "ops nest too deeply");
        ++op_depth_;
        absl::StatusOr<std::unique_ptr<Transform>> op = Op();
        --op_depth_;
        if (!op.ok()) return op.status();
        v.kind = TransformArgValue::Kind::kOp;
        v.op = std::move(*op);
        v.text = std::string(text_.substr(start, pos_ - start));
        return v;
      }
      pos_ = after;
      return v;
    }
    return Number();
  }

  absl::StatusOr<TransformArgValue> Number() {
    TransformArgValue v;
    v.position = pos_ + 1;
    const size_t start = pos_;
    size_t digits = pos_ + (text_[pos_] == '+' ? 1 : 0);  // from_chars takes no '+'
    const char* end = text_.data() + text_.size();
    auto [ptr, ec] = std::from_chars(text_.data() + digits, end, v.number);
    if (ec == std::errc::result_out_of_range) {
      // A number too small for a double (1e-400) is read as Python's float() reads it: rounded
      // to 0 (or the nearest subnormal), as sluice.transforms passes it; one too large (1e309)
      // stays an error below.
      const std::string written(text_.data() + digits, ptr);
      const double rounded = std::strtod(written.c_str(), nullptr);
      if (std::fabs(rounded) <= 1.0) {
        v.number = rounded;
        ec = std::errc();
      }
    }
    pos_ = ptr - text_.data();
    const bool delimited = pos_ == text_.size() || std::isspace(static_cast<unsigned char>(*ptr)) ||
                           *ptr == ',' || *ptr == ')' || *ptr == ']';
    if (ec != std::errc() || !delimited || (digits > start && text_[digits] == '-')) {
      while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) &&
             text_[pos_] != ',' && text_[pos_] != ')' && text_[pos_] != ']') {
        ++pos_;
      }
      return Error(
          start,
          absl::StrCat("expected a number, a name or a list, got '",
                       Printable(text_.substr(start, std::max(pos_, start + 1) - start)), "'"));
    }
    v.text = std::string(text_.substr(start, pos_ - start));
    return v;
  }

  absl::StatusOr<TransformArgValue> List(int depth) {
    TransformArgValue v;
    v.kind = TransformArgValue::Kind::kList;
    v.position = pos_ + 1;
    const size_t open = pos_;
    const char close = text_[pos_] == '[' ? ']' : ')';
    if (depth >= kMaxListDepth) return Error(open, "lists nest too deeply");
    ++pos_;
    SkipSpace();
    while (!Accept(close)) {
      if (pos_ == text_.size()) {
        return Error(open, absl::StrCat("missing '", std::string(1, close), "' to close this '",
                                        std::string(1, text_[open]), "'"));
      }
      ASSIGN_OR_RETURN(TransformArgValue item, Value(depth + 1));
      v.items.push_back(std::move(item));
      SkipSpace();
      if (Accept(close)) break;
      if (pos_ == text_.size()) {
        return Error(open, absl::StrCat("missing '", std::string(1, close), "' to close this '",
                                        std::string(1, text_[open]), "'"));
      }
      if (!Accept(',')) {
        return Error(pos_, absl::StrCat("expected ',' or '", std::string(1, close),
                                        "' in the list opened at character ", open + 1));
      }
      SkipSpace();
    }
    v.text = std::string(text_.substr(open, pos_ - open));
    return v;
  }

  absl::string_view text_;
  size_t pos_ = 0;
  int op_depth_ = 0;
  size_t ops_seen_ = 0;
};
}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Transform>>> ParseTransforms(absl::string_view text) {
  if (text.size() > kMaxTransformsTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the transform list is ", text.size(), " bytes, more than the maximum ",
        kMaxTransformsTextBytes, " (a chain of ", kMaxTransformOps, " ops takes a few kilobytes)"));
  }
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Transform>> ops, Parser(text).Chain());
  // DecodeImage(draft=True) drafts to the size of the first op after it that makes one.
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto* decode = dynamic_cast<const DecodeImage*>(ops[i].get());
    if (decode == nullptr || !decode->draft_pending()) continue;
    std::optional<std::pair<uint32_t, uint32_t>> size;
    for (size_t j = i + 1; j < ops.size() && !size.has_value(); ++j) size = ops[j]->SizeItMakes();
    if (!size.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "transform ", i + 1,
          ", DecodeImage(draft=True): no Resize, RandomResizedCrop or "
          "CenterCrop after it to take the draft's size from; expected one, or draft=size (an "
          "int or (h, w))"));
    }
    ops[i] = decode->WithDraft(size->first, size->second);
  }
  return ops;
}

}  // namespace sluice
