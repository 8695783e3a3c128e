#include "pipeline/transforms/transform_args.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/printable.h"

namespace sluice {
namespace {
std::string ValueText(const TransformArgValue& v) {
  if (v.kind != TransformArgValue::Kind::kList) return v.text;
  std::vector<std::string> items;
  for (const TransformArgValue& item : v.items) items.push_back(ValueText(item));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

bool IsInteger(const TransformArgValue& v) {
  return v.kind == TransformArgValue::Kind::kNumber && std::floor(v.number) == v.number &&
         std::abs(v.number) < 0x1p53;
}
}  // namespace

const TransformArgValue* TransformArgs::Find(absl::string_view name) const {
  for (const auto& [key, value] : values_) {
    if (key == name) return &value;
  }
  return nullptr;
}

std::string TransformArgs::Where(absl::string_view name) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr || v->position == 0) return absl::StrCat(op_, " argument '", name, "'");
  return absl::StrCat(op_, " argument '", name, "' (character ", v->position, ")");
}

absl::Status TransformArgs::Missing(absl::string_view name) const {
  return absl::InvalidArgumentError(
      absl::StrCat(op_, op_position_ > 0 ? absl::StrCat(" (character ", op_position_, ")") : "",
                   ": missing argument '", name, "'"));
}

absl::Status TransformArgs::Wrong(absl::string_view name, absl::string_view expected) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(name), ": expected ", expected, ", got '",
                                                 Printable(ValueText(*Find(name))), "'"));
}

absl::StatusOr<double> TransformArgs::Number(absl::string_view name,
                                             std::optional<double> fallback) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return fallback ? absl::StatusOr<double>(*fallback) : Missing(name);
  if (v->kind != TransformArgValue::Kind::kNumber) return Wrong(name, "a number");
  return v->number;
}

absl::StatusOr<int64_t> TransformArgs::Int(absl::string_view name,
                                           std::optional<int64_t> fallback) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return fallback ? absl::StatusOr<int64_t>(*fallback) : Missing(name);
  if (!IsInteger(*v)) return Wrong(name, "an integer");
  return static_cast<int64_t>(v->number);
}

absl::StatusOr<bool> TransformArgs::Bool(absl::string_view name,
                                         std::optional<bool> fallback) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return fallback ? absl::StatusOr<bool>(*fallback) : Missing(name);
  if (v->kind == TransformArgValue::Kind::kName) {
    if (v->text == "True" || v->text == "true") return true;
    if (v->text == "False" || v->text == "false") return false;
  }
  return Wrong(name, "True or False");
}

absl::StatusOr<std::string> TransformArgs::Name(absl::string_view name,
                                                std::optional<std::string> fallback) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return fallback ? absl::StatusOr<std::string>(*fallback) : Missing(name);
  if (v->kind != TransformArgValue::Kind::kName) return Wrong(name, "a name");
  return v->text;
}

absl::StatusOr<std::vector<std::shared_ptr<const Transform>>> TransformArgs::Ops(
    absl::string_view name) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return Missing(name);
  if (v->kind == TransformArgValue::Kind::kOp) {
    return std::vector<std::shared_ptr<const Transform>>{v->op};
  }
  std::vector<std::shared_ptr<const Transform>> out;
  if (v->kind == TransformArgValue::Kind::kList) {
    for (const TransformArgValue& item : v->items) {
      if (item.kind != TransformArgValue::Kind::kOp) break;
      out.push_back(item.op);
    }
  }
  if (out.empty() || out.size() != v->items.size()) {
    return Wrong(name, "an op or a list of ops, e.g. [ColorJitter(0.4, 0.4, 0.4)]");
  }
  return out;
}

absl::StatusOr<std::optional<double>> TransformArgs::NumberOrNone(
    absl::string_view name, std::optional<double> fallback) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return fallback;
  if (v->kind == TransformArgValue::Kind::kName && v->text == "None") {
    return std::optional<double>();
  }
  if (v->kind != TransformArgValue::Kind::kNumber) return Wrong(name, "a number or None");
  return std::optional<double>(v->number);
}

absl::StatusOr<std::vector<double>> TransformArgs::Numbers(absl::string_view name) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) return Missing(name);
  if (v->kind == TransformArgValue::Kind::kNumber) return std::vector<double>{v->number};
  std::vector<double> out;
  if (v->kind == TransformArgValue::Kind::kList) {
    for (const TransformArgValue& item : v->items) {
      if (item.kind != TransformArgValue::Kind::kNumber) break;
      out.push_back(item.number);
    }
  }
  if (out.empty() || out.size() != v->items.size()) {
    return Wrong(name, "a number or a list of numbers");
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> TransformArgs::Ints(
    absl::string_view name, std::vector<size_t> lengths,
    std::optional<std::vector<int64_t>> fallback) const {
  const TransformArgValue* v = Find(name);
  if (v == nullptr) {
    return fallback ? absl::StatusOr<std::vector<int64_t>>(*fallback) : Missing(name);
  }
  std::vector<TransformArgValue> items =
      v->kind == TransformArgValue::Kind::kList ? v->items : std::vector<TransformArgValue>{*v};
  bool ok = std::find(lengths.begin(), lengths.end(), items.size()) != lengths.end();
  std::vector<int64_t> out;
  for (const TransformArgValue& item : items) {
    ok = ok && IsInteger(item) && item.number >= 0;
    out.push_back(ok ? static_cast<int64_t>(item.number) : 0);
  }
  if (!ok) {
    std::vector<std::string> forms;
    for (size_t n : lengths) {
      forms.push_back(n == 1 ? "a non-negative integer"
                             : absl::StrCat("a list of ", n, " non-negative integers"));
    }
    return Wrong(name, absl::StrJoin(forms, " or "));
  }
  return out;
}

std::string FormatFloat(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

std::string FormatDouble(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::string("nan");
}

}  // namespace sluice
