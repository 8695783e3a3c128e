// The arguments of one op as the --transforms grammar gives them (parse.h): values bound to the
// op's parameter names, with typed accessors whose errors name the op, the argument, where it
// was written and what was expected. Each op's FromArgs reads its own arguments through this.
#ifndef SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_ARGS_H_
#define SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

class Transform;

// One value: a number (3, -0.5, 1e-3), a name (reflect, True, float32, or a quoted string), a
// list ([1, 2] or (1, 2)), or an op (ColorJitter(0.4), the ops RandomApply takes).
struct TransformArgValue {
  enum class Kind { kNumber, kName, kList, kOp };
  Kind kind = Kind::kNumber;
  double number = 0;
  std::string text;  // as written (a name without its quotes)
  std::vector<TransformArgValue> items;
  std::shared_ptr<const Transform> op;  // kOp: the op, parsed and built
  size_t position = 0;  // 1-based character of the value in the chain text; 0 if not parsed
};

class TransformArgs {
 public:
  TransformArgs(std::string op, size_t op_position,
                std::vector<std::pair<std::string, TransformArgValue>> values)
      : op_(std::move(op)), op_position_(op_position), values_(std::move(values)) {}

  const std::string& op() const { return op_; }
  bool Has(absl::string_view name) const { return Find(name) != nullptr; }

  // Each returns `fallback` when the argument is absent (and kInvalidArgument when it is
  // required, i.e. fallback is nullopt), and kInvalidArgument when it has the wrong form.
  absl::StatusOr<double> Number(absl::string_view name, std::optional<double> fallback) const;
  absl::StatusOr<int64_t> Int(absl::string_view name, std::optional<int64_t> fallback) const;
  absl::StatusOr<bool> Bool(absl::string_view name, std::optional<bool> fallback) const;
  absl::StatusOr<std::string> Name(absl::string_view name,
                                   std::optional<std::string> fallback) const;
  // A number or a list of numbers (a bare number is a list of one).
  absl::StatusOr<std::vector<double>> Numbers(absl::string_view name) const;
  // An op or a list of ops (RandomApply's transforms), at least one; `fallback` when absent.
  absl::StatusOr<std::vector<std::shared_ptr<const Transform>>> Ops(absl::string_view name) const;
  // A number or None: nullopt for None (torchvision's "not given").
  absl::StatusOr<std::optional<double>> NumberOrNone(absl::string_view name,
                                                     std::optional<double> fallback) const;
  // A non-negative integer or a list of them, of one of the lengths in `lengths` (a bare
  // integer counts as length 1); `fallback` when absent.
  absl::StatusOr<std::vector<int64_t>> Ints(absl::string_view name, std::vector<size_t> lengths,
                                            std::optional<std::vector<int64_t>> fallback) const;

  // "Normalize argument 'std' (character 31)": the prefix of an error about one argument.
  std::string Where(absl::string_view name) const;
  // kInvalidArgument: "<Where(name)>: expected <expected>, got '<the value as written>'", the
  // value escaped and cut to 200 characters (common/printable.h). `name` must be present.
  absl::Status Wrong(absl::string_view name, absl::string_view expected) const;

 private:
  const TransformArgValue* Find(absl::string_view name) const;
  absl::Status Missing(absl::string_view name) const;

  std::string op_;
  size_t op_position_;
  std::vector<std::pair<std::string, TransformArgValue>> values_;
};

// The shortest text that reads back as exactly `v` (canonical numbers in identities).
std::string FormatFloat(float v);
std::string FormatDouble(double v);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_ARGS_H_
