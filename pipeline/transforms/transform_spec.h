// TransformSpec: a chain of per-sample ops as a user names it (sluice-train's --transforms,
// sluice.Loader(transforms=...)), parsed in this one place, where the text enters, and passed
// on as this value (BatchFormat::transforms). The grammar is ParseTransforms' (parse.h).
//
//   ASSIGN_OR_RETURN(TransformSpec spec, TransformSpec::Parse(text));   // at the door only
//   options.format.transforms = spec;
//   ...
//   ASSIGN_OR_RETURN(TransformChain chain, TransformChain::Create(spec, input));
//   spec.identity()            // the run identity, cache keys, reports, messages
//
// identity() is the ops' canonical identities joined by ", " (TransformChain::Identity of a
// chain built from it, byte for byte; "" for no ops): two spellings of the same ops have the
// same identity. Whoever needs the chain's text reads it here, never the user's text. An empty
// spec (no ops: an empty or blank text) means no transforms.
//
// Errors: Parse returns ParseTransforms' kInvalidArgument unchanged; the door prefixes the
// setting's name ("--transforms", "transforms: ...").
// Thread safety: an immutable value; copies share the ops, which are immutable (transform.h).
#ifndef SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_SPEC_H_
#define SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_SPEC_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/transforms/transform.h"

namespace sluice {

class TransformSpec {
 public:
  TransformSpec() = default;  // no ops
  explicit TransformSpec(std::vector<std::unique_ptr<Transform>> ops);

  // `text` in the --transforms grammar (ParseTransforms).
  static absl::StatusOr<TransformSpec> Parse(absl::string_view text);

  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const Transform& op(size_t i) const { return *ops_[i]; }
  const std::string& identity() const { return identity_; }

 private:
  std::vector<std::shared_ptr<const Transform>> ops_;
  std::string identity_;
};

// The chain that evaluates a test split of a model trained through `train`: each op's
// EvalForm (transform.h), the deterministic counterpart of a random op, joined and parsed; the
// same spec when no op is random (a chain of deterministic ops evaluates as it trains). It is
// docs/transforms.md's "Evaluation" rule, sluice-train's default --eval-transforms.
absl::StatusOr<TransformSpec> EvalTransforms(const TransformSpec& train);

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_SPEC_H_
