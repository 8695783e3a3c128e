// TransformChain: ops applied one after the other to each sample, validated once for an input
// spec before the run (each op's OutputSpec in order), then applied per sample with no
// allocation through two caller-owned ping-pong intermediates.
//
//   ASSIGN_OR_RETURN(TransformChain chain, TransformChain::Create(std::move(ops), input));
//   std::vector<char> scratch(chain.scratch_bytes());          // one per thread
//   chain.Apply(src, dst, SampleKey{seed, epoch, index}, scratch.data());
//
// Op k draws its random parameters from SampleRandom(key, k), so an op's draws depend on
// neither the other ops nor the order samples are processed in.
//
// Per-op timing: pass `op_ns` (size() accumulators) to Apply; the samples with
// TimesSample(index) (every kTimingStride-th index) add each op's steady-clock ns to it, the
// others cost one branch. Accumulators belong to the caller (one set per thread).
//
// Thread safety: immutable after Create; Apply may run on many threads with their own scratch.
#ifndef SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_CHAIN_H_
#define SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/transform.h"

namespace sluice {

class TransformChain {
 public:
  static constexpr uint64_t kTimingStride = 16;
  static bool TimesSample(uint64_t index) { return index % kTimingStride == 0; }

  // kInvalidArgument naming the op (its position, identity and input spec) that cannot take
  // what the ops before it output. An empty chain copies samples unchanged.
  static absl::StatusOr<TransformChain> Create(std::vector<std::unique_ptr<Transform>> ops,
                                               const SampleSpec& input);

  const SampleSpec& input_spec() const { return specs_.front(); }
  const SampleSpec& output_spec() const { return specs_.back(); }
  // The input spec of op i (i < size()) or the output (i == size()).
  const SampleSpec& spec(size_t i) const { return specs_[i]; }
  size_t size() const { return ops_.size(); }
  const Transform& op(size_t i) const { return *ops_[i]; }
  // The ops' identities joined by ", " (ParseTransforms reads it back); "" when empty.
  std::string Identity() const;

  // Bytes of scratch Apply needs per thread (two intermediates, each 64-byte aligned within
  // it); 0 for chains of up to one op.
  size_t scratch_bytes() const { return 2 * scratch_half_; }

  // Transforms one sample: src holds input_spec().bytes(), dst receives output_spec().bytes();
  // scratch holds scratch_bytes() and is 64-byte aligned, as are src and dst to their element
  // size. src and dst must not overlap.
  void Apply(const void* src, void* dst, const SampleKey& key, void* scratch,
             int64_t* op_ns = nullptr) const;

 private:
  TransformChain() = default;

  std::vector<std::unique_ptr<const Transform>> ops_;
  std::vector<SampleSpec> specs_;  // size() + 1: the input, then each op's output
  size_t scratch_half_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_CHAIN_H_
