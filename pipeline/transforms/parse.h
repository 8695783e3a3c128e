// ParseTransforms: a chain of ops from text, as sluice-train's --transforms takes it
// (docs/transforms.md). torchvision's constructor calls, separated by commas:
//
//   chain := [ op { "," op } ]
//   op    := NAME "(" [ arg { "," arg } [ "," ] ] ")"
//   arg   := value | NAME "=" value              positional arguments first, as in Python
//   value := NUMBER | NAME | 'text' | "text" | "[" [ value { "," value } ] "]" | "(" ... ")"
//
//   RandomCrop(32, padding=4, padding_mode=reflect), RandomHorizontalFlip(),
//   Normalize(mean=[0.49, 0.48, 0.45], std=[0.25, 0.24, 0.26])
//
// NAME is [A-Za-z_][A-Za-z0-9_.]*; NUMBER is a decimal as Python writes it (-1, 0.5, 1e-3).
// Spaces are free between tokens. Every Transform's Identity() reads back to an equal op.
//
// Errors are kInvalidArgument, one line: the 1-based character and the text there, then what
// is wrong: an unknown op (listing the known ones), an argument the op does not have (listing
// its arguments), a bad number, a missing bracket, a value of the wrong form. The ops are built
// but not checked against a sample spec: TransformChain::Create does that.
#ifndef SLUICE_PIPELINE_TRANSFORMS_PARSE_H_
#define SLUICE_PIPELINE_TRANSFORMS_PARSE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"

namespace sluice {

absl::StatusOr<std::vector<std::unique_ptr<Transform>>> ParseTransforms(absl::string_view text);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_PARSE_H_
