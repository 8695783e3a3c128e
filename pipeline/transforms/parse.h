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
// its arguments), a bad number, a missing bracket, a value of the wrong form. Every piece of
// the text an error quotes is escaped and cut (common/printable.h), so a 10 MB argument is
// echoed as 200 characters and its length. The ops are built but not checked against a sample
// spec: TransformChain::Create does that. DecodeImage(draft=True) is given its size here, the
// size of the first op after it that makes one (Transform::SizeItMakes).
//
// Bounds (docs/limits.md, "Echoed input"): the text is at most kMaxTransformsTextBytes and
// // the chain at most kMaxTransformOps ops: a longer text is refused before it is parsed, a
// longer chain at its first op past the bound, so a list of megabytes fails at once with
// bounded memory (one of 4 MB took 18 s and 3.3 GB before).
#ifndef SLUICE_PIPELINE_TRANSFORMS_PARSE_H_
#define SLUICE_PIPELINE_TRANSFORMS_PARSE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"

namespace sluice {

inline constexpr size_t kMaxTransformsTextBytes = 64 * 1024;
inline constexpr size_t kMaxTransformOps = 64;

absl::StatusOr<std::vector<std::unique_ptr<Transform>>> ParseTransforms(absl::string_view text);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_PARSE_H_
