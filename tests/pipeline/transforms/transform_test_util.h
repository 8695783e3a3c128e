// Helpers of the transform tests: building ops from text and applying one to a vector.
#ifndef SLUICE_TESTS_PIPELINE_TRANSFORMS_TRANSFORM_TEST_UTIL_H_
#define SLUICE_TESTS_PIPELINE_TRANSFORMS_TRANSFORM_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/sample_spec.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/transform.h"

namespace sluice::testing {

inline SampleSpec Chw(ElementType t, uint32_t c, uint32_t h, uint32_t w) {
  return SampleSpec{t, c, h, w, SampleLayout::kCHW};
}

// The single op `text` describes; fails the test when it does not parse.
inline std::unique_ptr<Transform> OneOp(const std::string& text) {
  auto ops = ParseTransforms(text);
  EXPECT_TRUE(ops.ok()) << ops.status();
  if (!ops.ok() || ops->size() != 1) return nullptr;
  return std::move(ops->front());
}

// Applies `op` to the values `in` (of type T, spec `spec`) for sample `index`, as op 0.
template <typename Out, typename In>
std::vector<Out> ApplyOp(const Transform& op, const SampleSpec& spec, const std::vector<In>& in,
                         uint64_t index = 0, uint64_t seed = 1, uint64_t epoch = 0) {
  auto out_spec = op.OutputSpec(spec);
  EXPECT_TRUE(out_spec.ok()) << out_spec.status();
  std::vector<Out> out(out_spec->values());
  SampleRandom rng(SampleKey{seed, epoch, index}, 0);
  op.Apply(spec, in.data(), out.data(), rng);
  return out;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_PIPELINE_TRANSFORMS_TRANSFORM_TEST_UTIL_H_
