// The ops the --transforms grammar knows (parse.h): one line per op in registry.cc, giving its
// name, its parameters in torchvision's positional order and the function that builds it.
#ifndef SLUICE_PIPELINE_TRANSFORMS_REGISTRY_H_
#define SLUICE_PIPELINE_TRANSFORMS_REGISTRY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "pipeline/transforms/transform.h"
#include "pipeline/transforms/transform_args.h"

namespace sluice {

struct TransformInfo {
  absl::string_view name;
  absl::Span<const absl::string_view> params;
  absl::StatusOr<std::unique_ptr<Transform>> (*from_args)(const TransformArgs& args);
};

// Every op, sorted by name.
absl::Span<const TransformInfo> RegisteredTransforms();
// The op called `name`, or null.
const TransformInfo* FindTransform(absl::string_view name);
// "CenterCrop, Normalize, ...": the known names, for error messages.
std::string RegisteredTransformNames();

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_REGISTRY_H_
