#include "pipeline/transforms/transform_chain.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pipeline/stage_stats.h"

namespace sluice {

absl::StatusOr<TransformChain> TransformChain::Create(std::vector<std::unique_ptr<Transform>> ops,
                                                      const SampleSpec& input) {
  TransformChain chain;
  chain.specs_.push_back(input);
  for (size_t i = 0; i < ops.size(); ++i) {
    absl::StatusOr<SampleSpec> out = ops[i]->OutputSpec(chain.specs_.back());
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("transform ", i + 1, " of ", ops.size(), ", ", ops[i]->Identity(), ", on ",
                       SampleSpecString(chain.specs_.back()), ": ", out.status().message()));
    }
    chain.specs_.push_back(*out);
    // Intermediates are the outputs of every op but the last.
    if (i + 1 < ops.size()) {
      chain.scratch_half_ = std::max(chain.scratch_half_, (out->bytes() + 63) / 64 * 64);
    }
  }
  for (std::unique_ptr<Transform>& op : ops) chain.ops_.push_back(std::move(op));
  return chain;
}

std::string TransformChain::Identity() const {
  std::string out;
  for (size_t i = 0; i < ops_.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ", " : "", ops_[i]->Identity());
  }
  return out;
}

void TransformChain::Apply(const void* src, void* dst, const SampleKey& key, void* scratch,
                           int64_t* op_ns) const {
  if (ops_.empty()) {
    std::memcpy(dst, src, specs_.front().bytes());
    return;
  }
  const bool timed = op_ns != nullptr && TimesSample(key.index);
  char* halves[2] = {static_cast<char*>(scratch), static_cast<char*>(scratch) + scratch_half_};
  const void* in = src;
  for (size_t i = 0; i < ops_.size(); ++i) {
    void* out = i + 1 == ops_.size() ? dst : halves[i % 2];
    SampleRandom rng(key, i);
    const int64_t start = timed ? NowNs() : 0;
    ops_[i]->Apply(specs_[i], in, out, rng);
    if (timed) op_ns[i] += NowNs() - start;
    in = out;
  }
}

}  // namespace sluice
