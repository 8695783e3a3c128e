#include "pipeline/transforms/internal/op_sequence.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice::transforms_internal {
namespace {
size_t Aligned64(size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

std::string OpListIdentity(const OpList& ops) {
  std::string out = "[";
  for (size_t i = 0; i < ops.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", ops[i]->Identity());
  }
  return out + "]";
}

absl::StatusOr<SampleSpec> SequenceOutputSpec(absl::string_view outer, const OpList& ops,
                                              const SampleSpec& in) {
  if (!in.fixed()) {
    return absl::InvalidArgumentError(absl::StrCat(
        outer, ": expected samples of one size, got ", SampleSpecString(in),
        "; put it after the op that fixes the size (Resize, RandomResizedCrop, CenterCrop)"));
  }
  SampleSpec spec = in;
  for (const auto& op : ops) {
    absl::StatusOr<SampleSpec> next = op->OutputSpec(spec);
    if (!next.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(outer, ": ", op->Identity(), ": ", next.status().message()));
    }
    spec = *next;
  }
  return spec;
}

bool SameSamples(const SampleSpec& a, const SampleSpec& b) {
  return a.dtype == b.dtype && a.channels == b.channels && a.height == b.height &&
         a.width == b.width && a.layout == b.layout;
}

size_t SequenceScratchBytes(const OpList& ops, const SampleSpec& in) {
  size_t half = 0, inner = 0;
  SampleSpec spec = in;
  for (size_t i = 0; i < ops.size(); ++i) {
    inner = std::max(inner, Aligned64(ops[i]->ScratchBytes(spec)));
    spec = *ops[i]->OutputSpec(spec);
    if (i + 1 < ops.size()) half = std::max(half, Aligned64(spec.bytes()));
  }
  return 2 * half + inner;
}

void ApplySequence(const OpList& ops, const SampleSpec& in, const void* src, void* dst,
                   SampleRandom& rng, void* scratch) {
  size_t half = 0;
  SampleSpec spec = in;
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    spec = *ops[i]->OutputSpec(spec);
    half = std::max(half, Aligned64(spec.bytes()));
  }
  char* base = static_cast<char*>(scratch);
  char* halves[2] = {base, base + half};
  const void* from = src;
  spec = in;
  for (size_t i = 0; i < ops.size(); ++i) {
    void* to = i + 1 == ops.size() ? dst : halves[i % 2];
    ops[i]->ApplyWithScratch(spec, from, to, rng, base + 2 * half);
    spec = *ops[i]->OutputSpec(spec);
    from = to;
  }
}

std::string SequenceDraws(const OpList& ops, const SampleSpec& in, SampleRandom& rng) {
  std::string out = "[";
  SampleSpec spec = in;
  for (size_t i = 0; i < ops.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", ops[i]->Draws(spec, rng));
    spec = *ops[i]->OutputSpec(spec);
  }
  return out + "]";
}

}  // namespace sluice::transforms_internal
