// Ops run in turn inside another op (RandomApply's transforms, RandomChoice's chosen one) on one
// fixed-size sample, through the outer op's scratch: two ping-pong intermediates of the largest
// intermediate's bytes, then the inner ops' own scratch. The inner ops draw from the outer op's
// SampleRandom, after its own draw, in order.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_OP_SEQUENCE_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_OP_SEQUENCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/transform.h"

namespace sluice::transforms_internal {

using OpList = std::vector<std::shared_ptr<const Transform>>;

// "[A(...), B(...)]": the ops' identities as a list of the grammar.
std::string OpListIdentity(const OpList& ops);

// The spec `ops` make of `in`, run in turn; kInvalidArgument naming `outer`, the inner op and
// why it refused its input; or when `in` varies in size (the inner ops run on fixed sizes).
absl::StatusOr<SampleSpec> SequenceOutputSpec(absl::string_view outer, const OpList& ops,
                                              const SampleSpec& in);

// Whether two specs hold the same samples (element type, channels, size, layout).
bool SameSamples(const SampleSpec& a, const SampleSpec& b);

// The scratch ApplySequence needs for `in` (which SequenceOutputSpec accepted).
size_t SequenceScratchBytes(const OpList& ops, const SampleSpec& in);

// Runs `ops` in turn from src into dst, drawing from `rng`; `scratch` holds
// SequenceScratchBytes(ops, in) bytes, 64-byte aligned.
void ApplySequence(const OpList& ops, const SampleSpec& in, const void* src, void* dst,
                   SampleRandom& rng, void* scratch);

// Each op's Draws, in turn from `rng`, as a JSON list.
std::string SequenceDraws(const OpList& ops, const SampleSpec& in, SampleRandom& rng);

// Runs `apply(scratch)` with a scratch of `bytes`, 64-byte aligned, allocated for this call:
// the plain Apply of an op whose chain form takes the chain's scratch.
template <typename F>
void WithOwnScratch(size_t bytes, F apply) {
  std::vector<char> buffer(bytes + 64);
  char* aligned = buffer.data();
  aligned += (64 - reinterpret_cast<uintptr_t>(aligned) % 64) % 64;
  apply(static_cast<void*>(aligned));
}

}  // namespace sluice::transforms_internal

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_OP_SEQUENCE_H_
