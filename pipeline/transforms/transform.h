// The interface of one sample transform (docs/transforms.md): an op that maps one channels-first
// sample to another, declared before the run and applied per sample without allocating.
//
//   ASSIGN_OR_RETURN(SampleSpec out, op.OutputSpec(in));    // before the run: sizes the pools
//   SampleRandom rng(SampleKey{seed, epoch, index}, position);
//   op.Apply(in, src, dst, rng);                            // per sample, on any thread
//
// Random parameters come from (seed, epoch, global sample index, op position) only, through
// SampleRandom: the same sample gets the same crop for any thread count, world size, call order
// or resume point. Ops are chained by TransformChain (transform_chain.h), parsed from text by
// ParseTransforms (parse.h) and listed in the registry (registry.h).
//
// Thread safety: a Transform is immutable after creation; Apply is const and may run on many
// threads at once. SampleRandom is a value owned by one call.
#ifndef SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_H_
#define SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "pipeline/sample_spec.h"

namespace sluice {

// Where a sample sits in the run: the run's seed, the epoch and the sample's global index in
// that epoch's order (the same on every rank and for every thread count).
struct SampleKey {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t index = 0;
};

// A counter-based generator: its stream is a pure function of (key, stream), so two
// SampleRandoms built from the same arguments give the same numbers wherever they run.
// splitmix64 over a state mixed from the four inputs.
class SampleRandom {
 public:
  SampleRandom(const SampleKey& key, uint64_t stream);

  uint64_t Next();
  // Uniform over [lo, hi] (inclusive, lo <= hi), exactly: rejection removes the modulo bias.
  uint64_t UniformInt(uint64_t lo, uint64_t hi);
  // Uniform over [0, 1), 53 random bits.
  double UniformDouble();

 private:
  uint64_t state_;
};

// The buffers of one per-sample call on a sample whose size is known only then (an encoded
// record, or a decoded image before an op fixes the size): src holds src_bytes; dst has room
// for dst_capacity bytes; op_scratch holds the op's ScratchBytes() for the chain's bound. All
// belong to the caller's thread.
struct SampleBuffers {
  const void* src = nullptr;
  size_t src_bytes = 0;
  void* dst = nullptr;
  size_t dst_capacity = 0;
  void* op_scratch = nullptr;
};

class Transform {
 public:
  virtual ~Transform() = default;

  // torchvision-style and parseable back by ParseTransforms, with every argument written out
  // in one canonical form (e.g. "RandomHorizontalFlip(p=0.5)"), so equal identities mean equal
  // transforms. It joins the run identity.
  virtual std::string Identity() const = 0;

  // The spec of the output for input `in`; kInvalidArgument saying what was expected when the
  // op cannot take `in` (a crop larger than the padded image, a mean of the wrong length, HWC
  // input...).
  virtual absl::StatusOr<SampleSpec> OutputSpec(const SampleSpec& in) const = 0;

  // Transforms one sample: `src` holds in.bytes() bytes, `dst` receives OutputSpec(in)->bytes()
  // bytes. Only called with an `in` that OutputSpec accepted; src and dst do not overlap and
  // are aligned to their element sizes. Allocates nothing.
  virtual void Apply(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng) const = 0;

  // Apply with the op's per-thread working memory: `scratch` holds ScratchBytes(in) bytes,
  // 64-byte aligned. TransformChain calls this form; the default ignores `scratch` and runs
  // Apply. Ops that run other ops in turn (RandomApply) override it, and their Apply without a
  // scratch allocates one.
  virtual void ApplyWithScratch(const SampleSpec& in, const void* src, void* dst, SampleRandom& rng,
                                void* scratch) const {
    Apply(in, src, dst, rng);
  }

  // The random parameters Apply would draw for a sample of spec `in` (one OutputSpec accepted)
  // from `rng`, as a JSON object, e.g. {"order": [2, 0, 1, 3], "brightness": 1.2109375}; "{}"
  // for an op that draws nothing. It consumes `rng` exactly as Apply does (both call the op's
  // one drawing function), so an op inside RandomApply reports what it applies. The oracle tests
  // run torchvision's functional ops with these parameters (python/tests).
  virtual std::string Draws(const SampleSpec& in, SampleRandom& rng) const { return "{}"; }

  // The per-sample form TransformChain uses where sizes vary (docs/transforms.md, "Variable
  // sizes"): `in` is this sample's actual spec (kFixed) or, for an encoded record, the chain's
  // kEncoded input spec. Returns the actual output spec, or kDataLoss saying why this sample
  // cannot be transformed (a corrupt image, an output over dst_capacity); the chain prefixes
  // the op's identity. The default runs OutputSpec(in) and Apply; ops that read encoded bytes
  // override it.
  virtual absl::StatusOr<SampleSpec> ApplyVariable(const SampleSpec& in, const SampleBuffers& io,
                                                   SampleRandom& rng) const;

  // Bytes of per-thread working memory ApplyVariable needs beside src and dst for any input
  // within `bound` (the op's input spec in the chain); TransformChain sizes it before the run.
  virtual size_t ScratchBytes(const SampleSpec& bound) const { return 0; }

  // The output size (height, width) this op makes of any input from its own arguments, where it
  // resizes or crops to one (Resize, its smaller edge as a square; RandomResizedCrop;
  // CenterCrop); nullopt for the others. DecodeImage(draft=True) takes its requested size from
  // the first op after it that has one (parse.cc).
  virtual std::optional<std::pair<uint32_t, uint32_t>> SizeItMakes() const { return std::nullopt; }

  // This op in the chain that evaluates a test split when the training chain is random
  // (EvalTransforms, transform_spec.h; docs/transforms.md, "Evaluation"), as --transforms text:
  // the op itself (Identity()) for a deterministic op; a random op gives its deterministic
  // counterpart, as torchvision's reference recipes evaluate (RandomResizedCrop(S): Resize of
  // S / 0.875 then CenterCrop(S); RandomCrop(S): CenterCrop(S)), or "" to be left out (a flip).
  virtual std::string EvalForm() const { return Identity(); }
};

}  // namespace sluice

#endif  // SLUICE_PIPELINE_TRANSFORMS_TRANSFORM_H_
