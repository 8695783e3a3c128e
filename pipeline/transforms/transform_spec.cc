#include "pipeline/transforms/transform_spec.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/transforms/parse.h"

namespace sluice {

TransformSpec::TransformSpec(std::vector<std::unique_ptr<Transform>> ops) {
  for (std::unique_ptr<Transform>& op : ops) {
    absl::StrAppend(&identity_, ops_.empty() ? "" : ", ", op->Identity());
    ops_.push_back(std::move(op));
  }
}

absl::StatusOr<TransformSpec> TransformSpec::Parse(absl::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Transform>> ops, ParseTransforms(text));
  return TransformSpec(std::move(ops));
}

absl::StatusOr<TransformSpec> EvalTransforms(const TransformSpec& train) {
  std::string text;
  bool changed = false;
  for (size_t i = 0; i < train.size(); ++i) {
    const std::string form = train.op(i).EvalForm();
    changed |= form != train.op(i).Identity();
    if (!form.empty()) absl::StrAppend(&text, text.empty() ? "" : ", ", form);
  }
  if (!changed) return train;
  return TransformSpec::Parse(text);
}

}  // namespace sluice
