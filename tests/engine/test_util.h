// Helpers shared by the engine tests: synthetic data and a training step composed of the
// reference ops (the ground truth the backends are compared with).
#ifndef SLUICE_TESTS_ENGINE_TEST_UTIL_H_
#define SLUICE_TESTS_ENGINE_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/reference_ops.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "pipeline/batch.h"

namespace sluice::testing {

// A CPU backend holding `state`; a creation error fails the calling test (and returns null).
inline std::unique_ptr<Backend> MakeCpuBackend(const ModelState& state, const OptimizerConfig& opt,
                                               const BackendOptions& options,
                                               const CpuBackendOptions& cpu = {}) {
  auto backend = CreateCpuBackend(state, opt, options, cpu);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

// Index of the first value whose bits differ, or -1 (0 when the sizes differ).
inline int64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

// Every parameter and optimizer-state value of `a` and `b` has the same bits; a failure names
// the tensor and the first differing element.
inline void ExpectBitwiseEqual(const ModelState& a, const ModelState& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  ASSERT_FALSE(a.params.empty());
  for (size_t p = 0; p < a.params.size(); ++p) {
    const int64_t i = FirstDifference(a.params[p].values, b.params[p].values);
    EXPECT_EQ(i, -1) << a.params[p].name << "[" << i << "]";
  }
  ASSERT_EQ(a.opt_state.size(), b.opt_state.size());
  for (size_t t = 0; t < a.opt_state.size(); ++t) {
    EXPECT_EQ(FirstDifference(a.opt_state[t].values, b.opt_state[t].values), -1)
        << a.opt_state[t].name;
  }
}

// `n` samples of `features` u8 pixels, about `nonzero` of them nonzero, and labels in
// [0, classes). With `separable`, class c lights up its own band of pixels so an MLP can learn
// it to high accuracy.
struct Dataset {
  std::vector<uint8_t> images;
  std::vector<int32_t> labels;
};
inline Dataset MakeDataset(int n, int features, int classes, double nonzero, uint64_t seed,
                           bool separable = false) {
  std::mt19937_64 rng(seed);
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  Dataset d;
  d.images.resize(static_cast<size_t>(n) * features);
  d.labels.resize(n);
  const int band = features / classes;
  for (int s = 0; s < n; ++s) {
    const int label = static_cast<int>(rng() % classes);
    d.labels[s] = label;
    for (int i = 0; i < features; ++i) {
      uint8_t px = unit() < nonzero ? static_cast<uint8_t>(1 + rng() % 255) : 0;
      if (separable) {
        const bool in_band = i / band == label;
        px = in_band ? static_cast<uint8_t>(128 + rng() % 128)
                     : (unit() < 0.3 ? static_cast<uint8_t>(rng() % 128) : 0);
      }
      d.images[static_cast<size_t>(s) * features + i] = px;
    }
  }
  return d;
}

inline BatchView U8Batch(const Dataset& d, int first, int size, int features) {
  BatchView v;
  v.samples = d.images.data() + static_cast<size_t>(first) * features;
  v.labels = d.labels.data() + first;
  v.sample.dtype = H2DFormat::kU8;
  v.size = size;
  v.sample = FlatSampleSpec(v.sample.dtype, features);
  return v;
}

// One training step of `state` composed of the reference ops (PyTorch layouts).
inline void ReferenceTrainStep(ModelState* state, const OptimizerConfig& opt, const float* x,
                               const int32_t* labels, int B, float lr) {
  const auto& layers = state->model.layers;
  const int L = static_cast<int>(layers.size()) - 1;
  std::vector<std::vector<float>> out(L), dout(L);
  for (int k = 0; k < L; ++k) {
    out[k].resize(static_cast<size_t>(B) * layers[k + 1]);
    dout[k].resize(out[k].size());
    const float* in = k == 0 ? x : out[k - 1].data();
    ref::LinearForward(in, state->params[2 * k].values.data(),
                       state->params[2 * k + 1].values.data(), B, layers[k], layers[k + 1],
                       k + 1 < L, out[k].data());
  }
  double loss = 0;
  int64_t correct = 0;
  ref::SoftmaxCrossEntropy(out[L - 1].data(), labels, B, layers[L], dout[L - 1].data(), &loss,
                           &correct);
  std::vector<std::vector<float>> grads(2 * L);
  for (int k = L - 1; k >= 0; --k) {
    grads[2 * k].resize(state->params[2 * k].values.size());
    grads[2 * k + 1].resize(state->params[2 * k + 1].values.size());
    const float* in = k == 0 ? x : out[k - 1].data();
    ref::LinearBackward(in, state->params[2 * k].values.data(), dout[k].data(), B, layers[k],
                        layers[k + 1], grads[2 * k].data(), grads[2 * k + 1].data(),
                        k > 0 ? dout[k - 1].data() : nullptr);
    if (k > 0) ref::ReluBackwardInPlace(out[k - 1].data(), dout[k - 1].size(), dout[k - 1].data());
  }
  const int64_t step = ++state->optimizer_steps;
  const size_t P = state->params.size();
  for (size_t p = 0; p < P; ++p) {
    auto& v = state->params[p].values;
    if (opt.kind == OptimizerKind::kAdamW) {
      ref::AdamWStep(v.data(), grads[p].data(), state->opt_state[p].values.data(),
                     state->opt_state[P + p].values.data(), v.size(), lr, opt.beta1, opt.beta2,
                     opt.eps, opt.weight_decay, step);
    } else {
      ref::SgdStep(v.data(), grads[p].data(),
                   state->opt_state.empty() ? nullptr : state->opt_state[p].values.data(), v.size(),
                   lr, opt.momentum, opt.nesterov, opt.weight_decay, step == 1);
    }
  }
}

// The scalar reference per channel: value i of [B, channels, plane] samples is of channel
// (i / plane) % channels (one channel: plane is ignored).
inline std::vector<float> NormalizeAll(const uint8_t* in, int64_t n, const Normalization& norm,
                                       int64_t plane = 1, int channels = 1) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = channels == 1 ? 0 : static_cast<size_t>((i / plane) % channels);
    ref::NormalizeU8(in + i, 1, norm.mean_of(c), norm.std_of(c), out.data() + i);
  }
  return out;
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_ENGINE_TEST_UTIL_H_
