// The CPU backend's bitwise promises, each comparing two runs of the same code (docs/
// architecture.md, "Per-CPU code paths"): an exchange over a world of one against the same
// update path without it, and the element-wise loops of every instruction-set level this CPU
// has against the baseline build. Run the suite under SLUICE_CPU_ISA and OPENBLAS_CORETYPE to
// check them with other kernels (scripts/test-cpu-paths.sh).
#include <random>
#include <vector>

#include "common/cpu_isa.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/internal/elementwise.h"
#include "engine/dist/communicator.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

using testing::Dataset;
using testing::MakeDataset;
using testing::U8Batch;

struct Run {
  bool exchange = false;
  bool fused_sgd = true;
};

// Trains `steps` batches of 32 from the same initial state and returns the final state.
ModelState Train(const OptimizerConfig& opt, const std::vector<int>& layers, double nonzero,
                 int threads, const Run& run) {
  ModelConfig model;
  model.layers = layers;
  const int B = 32, steps = 5;
  const Dataset d = MakeDataset(steps * B, layers[0], layers.back(), nonzero, 7);
  auto comm = dist::SingleProcessCommunicator();
  BackendOptions options;
  options.max_batch = B;
  options.gradient_comm = comm.get();
  options.exchange_in_world_of_one = run.exchange;
  auto backend = testing::MakeCpuBackend(InitModelState(model, opt, 5), opt, options,
                                         {.threads = threads, .fused_sgd = run.fused_sgd});
  EXPECT_NE(backend, nullptr);
  if (backend == nullptr) return {};
  for (int s = 0; s < steps; ++s) {
    EXPECT_TRUE(backend->TrainStep(U8Batch(d, s * B, B, layers[0]), 0.05f).ok());
  }
  auto state = backend->SaveState();
  EXPECT_TRUE(state.ok()) << state.status();
  return state.ok() ? std::move(*state) : ModelState{};
}

std::vector<std::pair<const char*, OptimizerConfig>> Optimizers() {
  OptimizerConfig sgd, momentum, adamw;
  momentum.momentum = 0.9f;
  momentum.weight_decay = 0.01f;
  adamw.kind = OptimizerKind::kAdamW;
  adamw.weight_decay = 0.05f;
  return {{"sgd", sgd}, {"momentum_wd", momentum}, {"adamw", adamw}};
}

// A sum over one rank changes nothing: with the exchange, the gradients are stored, summed and
// then stepped; without it, the same path (fused_sgd off). The reference MLP's shapes, on
// sparse inputs (the AVX-512 sparse first layer where the CPU has it) and dense ones.
TEST(BitwisePromisesTest, AWorldOfOneExchangeEqualsTheSameUpdatePathWithoutIt) {
  for (const auto& [name, opt] : Optimizers()) {
    for (int threads : {1, 2}) {
      for (double nonzero : {0.5, 1.0}) {
        SCOPED_TRACE(::testing::Message() << name << ", " << threads << " threads, nonzero "
                                          << nonzero << ", level " << CpuIsaName(UsableCpuIsa()));
        const std::vector<int> layers = {784, 128, 10};
        const ModelState plain = Train(opt, layers, nonzero, threads, {false, false});
        const ModelState exchanged = Train(opt, layers, nonzero, threads, {true, true});
        testing::ExpectBitwiseEqual(plain, exchanged);
      }
    }
  }
}

// The fused plain-SGD step (inside the gradient's sgemm) is the same update as storing the
// gradient and stepping it, up to rounding, which depends on the OpenBLAS kernel.
TEST(BitwisePromisesTest, TheFusedSgdStepEqualsTheStoredGradientStepUpToRounding) {
  const OptimizerConfig sgd;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    const ModelState fused = Train(sgd, {784, 128, 10}, 0.5, threads, {false, true});
    const ModelState stored = Train(sgd, {784, 128, 10}, 0.5, threads, {false, false});
    ASSERT_EQ(fused.params.size(), stored.params.size());
    for (size_t p = 0; p < fused.params.size(); ++p) {
      const auto& f = fused.params[p].values;
      const auto& s = stored.params[p].values;
      ASSERT_EQ(f.size(), s.size());
      for (size_t i = 0; i < f.size(); ++i) {
        ASSERT_NEAR(f[i], s[i], 1e-6 + 1e-5 * std::abs(s[i])) << fused.params[p].name << i;
      }
    }
  }
}

// Every level's element-wise loops give the baseline build's bits (they are built without FMA
// contraction). Levels the CPU lacks cannot run here and are named.
TEST(BitwisePromisesTest, EveryInstructionSetLevelOfTheElementwiseLoopsGivesTheSameBits) {
  using cpu_internal::ElementwiseKernels;
  std::vector<const ElementwiseKernels*> levels;
#if defined(__x86_64__)
  if (DetectedCpuIsa() >= CpuIsa::kAvx2) levels.push_back(&cpu_internal::avx2::kElementwise);
  if (DetectedCpuIsa() >= CpuIsa::kAvx512) levels.push_back(&cpu_internal::avx512::kElementwise);
#endif
  if (levels.empty()) {
    GTEST_SKIP() << "this CPU has only the baseline level (" << CpuIsaName(DetectedCpuIsa())
                 << "): no other build of the loops can run here";
  }
  const ElementwiseKernels& base = cpu_internal::baseline::kElementwise;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 1000 + 37;  // not a multiple of any vector width
  auto values = [&](float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng) * scale;
    return v;
  };
  const std::vector<float> grad = values(0.1f), init = values(1.0f), mom0 = values(0.01f);
  std::vector<uint8_t> pixels(n);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(rng());
  for (const ElementwiseKernels* level : levels) {
    SCOPED_TRACE(level->level);
    {
      std::vector<float> a = init, b = init;
      base.add_in_place(grad.data(), n, a.data());
      level->add_in_place(grad.data(), n, b.data());
      EXPECT_EQ(testing::FirstDifference(a, b), -1) << "add_in_place";
    }
    {
      std::vector<float> a(37), b(37);
      base.bias_grad(init.data(), 28, 37, a.data());
      level->bias_grad(init.data(), 28, 37, b.data());
      EXPECT_EQ(testing::FirstDifference(a, b), -1) << "bias_grad";
    }
    {
      std::vector<float> a = grad, b = grad;
      base.relu_backward(init.data(), n, a.data());
      level->relu_backward(init.data(), n, b.data());
      EXPECT_EQ(testing::FirstDifference(a, b), -1) << "relu_backward";
    }
    {
      std::vector<float> a(n), b(n);
      base.normalize_u8(pixels.data(), n, 0.2860f, 0.3530f, a.data());
      level->normalize_u8(pixels.data(), n, 0.2860f, 0.3530f, b.data());
      EXPECT_EQ(testing::FirstDifference(a, b), -1) << "normalize_u8";
    }
    for (const bool nesterov : {false, true}) {
      for (const float momentum : {0.0f, 0.9f}) {
        std::vector<float> pa = init, pb = init, ma = mom0, mb = mom0;
        base.sgd(pa.data(), grad.data(), ma.data(), n, 0.05f, momentum, nesterov, 0.01f, false);
        level->sgd(pb.data(), grad.data(), mb.data(), n, 0.05f, momentum, nesterov, 0.01f, false);
        EXPECT_EQ(testing::FirstDifference(pa, pb), -1) << "sgd momentum " << momentum;
        EXPECT_EQ(testing::FirstDifference(ma, mb), -1) << "sgd buffer momentum " << momentum;
      }
    }
    {
      std::vector<float> pa = init, pb = init, ma = mom0, mb = mom0, va(n, 0.001f), vb(n, 0.001f);
      base.adamw(pa.data(), grad.data(), ma.data(), va.data(), n, 0.9f, 0.999f, 1e-8f, 0.01f, 1.02f,
                 0.9995f);
      level->adamw(pb.data(), grad.data(), mb.data(), vb.data(), n, 0.9f, 0.999f, 1e-8f, 0.01f,
                   1.02f, 0.9995f);
      EXPECT_EQ(testing::FirstDifference(pa, pb), -1) << "adamw p";
      EXPECT_EQ(testing::FirstDifference(va, vb), -1) << "adamw v";
    }
  }
}

}  // namespace
}  // namespace sluice
