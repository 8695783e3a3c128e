#include "pipeline/transforms/transform.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice {
namespace {
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;

// splitmix64's output function (Steele, Lea, Flood 2014): a bijection with full avalanche.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

SampleRandom::SampleRandom(const SampleKey& key, uint64_t stream) {
  // Chained so that no two of the four inputs commute (index 1 of stream 0 differs from
  // index 0 of stream 1).
  uint64_t s = Mix(key.seed + kGamma);
  s = Mix(s ^ (key.epoch + 2 * kGamma));
  s = Mix(s ^ (key.index + 3 * kGamma));
  state_ = Mix(s ^ (stream + 4 * kGamma));
}

uint64_t SampleRandom::Next() {
  state_ += kGamma;
  return Mix(state_);
}

uint64_t SampleRandom::UniformInt(uint64_t lo, uint64_t hi) {
  const uint64_t range = hi - lo + 1;  // 0 means all 2^64 values
  if (range == 0) return Next();
  // 2^64 mod range values at the bottom would be drawn once too often; redraw them.
  const uint64_t threshold = (0 - range) % range;
  uint64_t x = Next();
  while (x < threshold) x = Next();
  return lo + x % range;
}

double SampleRandom::UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

absl::StatusOr<SampleSpec> Transform::ApplyVariable(const SampleSpec& in, const SampleBuffers& io,
                                                    SampleRandom& rng) const {
  absl::StatusOr<SampleSpec> out = OutputSpec(in);
  if (!out.ok()) return out.status();
  if (out->bytes() > io.dst_capacity) {
    return absl::DataLossError(absl::StrCat("output ", SampleSpecString(*out), " is ", out->bytes(),
                                            " bytes, more than the chain's bound of ",
                                            io.dst_capacity, " bytes for it"));
  }
  Apply(in, io.src, io.dst, rng);
  return out;
}

}  // namespace sluice
