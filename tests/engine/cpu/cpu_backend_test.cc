#include "engine/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include "common/status_macros.h"
#include "engine/backend_factory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

using testing::Dataset;
using ::testing::HasSubstr;
using testing::MakeDataset;
using testing::U8Batch;

std::unique_ptr<Backend> MakeCpu(const ModelState& state, const OptimizerConfig& opt, int max_batch,
                                 int threads = 1) {
  BackendOptions options;
  options.max_batch = max_batch;
  return testing::MakeCpuBackend(state, opt, options, {.threads = threads});
}

void ExpectStatesNear(const ModelState& actual, const ModelState& expected) {
  ASSERT_EQ(actual.params.size(), expected.params.size());
  ASSERT_EQ(actual.opt_state.size(), expected.opt_state.size());
  EXPECT_EQ(actual.optimizer_steps, expected.optimizer_steps);
  auto near = [](const HostTensor& a, const HostTensor& e) {
    EXPECT_EQ(a.name, e.name);
    ASSERT_EQ(a.shape, e.shape);
    for (size_t i = 0; i < a.values.size(); ++i) {
      ASSERT_NEAR(a.values[i], e.values[i], 1e-5 + 1e-4 * std::abs(e.values[i]))
          << a.name << "[" << i << "]";
    }
  };
  for (size_t p = 0; p < actual.params.size(); ++p) near(actual.params[p], expected.params[p]);
  for (size_t t = 0; t < actual.opt_state.size(); ++t) {
    near(actual.opt_state[t], expected.opt_state[t]);
  }
}

struct OptCase {
  const char* name;
  OptimizerConfig opt;
};

std::vector<OptCase> OptimizerCases() {
  OptimizerConfig sgd, momentum, nesterov, adamw;
  sgd.lr = 0.05f;
  momentum.momentum = 0.9f;
  momentum.weight_decay = 0.01f;
  nesterov.momentum = 0.8f;
  nesterov.nesterov = true;
  adamw.kind = OptimizerKind::kAdamW;
  adamw.weight_decay = 0.05f;
  return {{"sgd", sgd}, {"momentum_wd", momentum}, {"nesterov", nesterov}, {"adamw", adamw}};
}

// Sparse inputs (half the pixels zero) take the AVX-512 sparse first layer; dense inputs take
// sgemm. Both must equal the composition of reference ops, for every optimizer, on 1 thread and
// with the batch split across 2 and 3 (8 rows: slices of 4+4 and 3+3+2).
// With `channels` > 1 the samples are [channels, 1, features / channels] and normalized per
// channel (the batch carries the normalization, as the pipeline's u8 batches do).
void CheckStepsMatchReference(double nonzero, const std::vector<int>& layers,
                              const Normalization& norm = {}, int channels = 1) {
  for (int threads : {1, 2, 3}) {
    for (const OptCase& c : OptimizerCases()) {
      SCOPED_TRACE(::testing::Message() << c.name << ", " << threads << " threads");
      ModelConfig model;
      model.layers = layers;
      const int B = 8, features = layers[0];
      const Dataset d = MakeDataset(4 * B, features, layers.back(), nonzero, 11);
      ModelState expected = InitModelState(model, c.opt, 3);
      auto backend = MakeCpu(expected, c.opt, B, threads);
      for (int step = 0; step < 4; ++step) {
        const float lr = c.opt.kind == OptimizerKind::kAdamW ? 0.01f : 0.05f;
        BatchView batch = U8Batch(d, step * B, B, features);
        batch.sample.channels = static_cast<uint32_t>(channels);
        batch.sample.width = static_cast<uint32_t>(features / channels);
        batch.normalization = &norm;
        ASSERT_TRUE(backend->TrainStep(batch, lr).ok());
        const auto x = testing::NormalizeAll(d.images.data() + step * B * features, B * features,
                                             norm, features / channels, channels);
        testing::ReferenceTrainStep(&expected, c.opt, x.data(), d.labels.data() + step * B, B, lr);
      }
      auto actual = backend->SaveState();
      ASSERT_TRUE(actual.ok());
      ExpectStatesNear(*actual, expected);
    }
  }
}

TEST(CpuBackendTest, SparseInputStepsEqualReferenceOpComposition) {
  CheckStepsMatchReference(0.5, {40, 24, 5});
}

TEST(CpuBackendTest, DenseInputStepsEqualReferenceOpComposition) {
  CheckStepsMatchReference(1.0, {40, 24, 5});
}

TEST(CpuBackendTest, DeepModelWithWideLayersEqualsReferenceOpComposition) {
  // 150 outputs exercise the sparse kernel's second 128-wide chunk and tail masks.
  CheckStepsMatchReference(0.3, {33, 150, 17, 3});
  CheckStepsMatchReference(0.3, {33, 150, 17, 3}, Normalization{{0.2f}, {0.3f}});
}

TEST(CpuBackendTest, PerChannelNormalizationOfU8BatchesEqualsReferencePerChannelPlane) {
  // 3 channels of 11 values: each plane normalized with its own mean and std.
  CheckStepsMatchReference(0.6, {33, 24, 5},
                           Normalization{{0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}}, 3);
}

TEST(CpuBackendTest, NormalizationOfTheWrongLengthIsRefusedNamingTheChannels) {
  OptimizerConfig opt;
  ModelConfig model;
  model.layers = {12, 4, 3};
  const Dataset d = MakeDataset(4, 12, 3, 0.5, 2);
  auto backend = MakeCpu(InitModelState(model, opt, 1), opt, 4);
  BatchView batch = U8Batch(d, 0, 4, 12);
  batch.sample.channels = 3;
  batch.sample.width = 4;
  const Normalization two{{0.1f, 0.2f}, {1.0f}};
  batch.normalization = &two;
  const absl::Status s = backend->TrainStep(batch, 0.1f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("3 channels"));
}

TEST(CpuBackendTest, ShortLastBatchIsTrainedOnItsOwnSamplesOnly) {
  OptimizerConfig opt;
  ModelConfig model;
  model.layers = {20, 8, 3};
  const Dataset d = MakeDataset(5, 20, 3, 0.5, 2);
  ModelState expected = InitModelState(model, opt, 1);
  auto backend = MakeCpu(expected, opt, 16);
  ASSERT_TRUE(backend->TrainStep(U8Batch(d, 0, 5, 20), 0.1f).ok());
  const auto x = testing::NormalizeAll(d.images.data(), 5 * 20, Normalization{});
  testing::ReferenceTrainStep(&expected, opt, x.data(), d.labels.data(), 5, 0.1f);
  ExpectStatesNear(*backend->SaveState(), expected);
}

TEST(CpuBackendTest, U8F16AndF32BatchesOfTheSameValuesTrainIdentically) {
  OptimizerConfig opt;
  ModelConfig model;
  model.layers = {16, 8, 4};
  const Dataset d = MakeDataset(8, 16, 4, 0.5, 5);
  // Values exactly representable in f16: multiples of 1/256 below 1 are.
  Dataset exact = d;
  for (auto& px : exact.images) px = px & 0xF0;  // x/255 is not exact, so compare via f32 input
  const auto f32 = testing::NormalizeAll(exact.images.data(), exact.images.size(), Normalization{});
  std::vector<uint16_t> f16(f32.size());
  for (size_t i = 0; i < f32.size(); ++i) {
    // Round-to-nearest binary16 of an f32 in [0, 1]: enough for this test's values.
    uint32_t bits;
    std::memcpy(&bits, &f32[i], 4);
    if (f32[i] == 0) {
      f16[i] = 0;
      continue;
    }
    const int exponent = static_cast<int>((bits >> 23) & 0xFF) - 127 + 15;
    ASSERT_GT(exponent, 0);
    f16[i] = static_cast<uint16_t>((exponent << 10) | ((bits >> 13) & 0x3FF));
  }
  // Reconstruct what the f16 values are in f32, and feed those as f32.
  std::vector<float> f16_as_f32(f16.size());
  for (size_t i = 0; i < f16.size(); ++i) {
    if (f16[i] == 0) continue;
    const uint32_t bits = ((static_cast<uint32_t>(f16[i] >> 10) + 112) << 23) |
                          (static_cast<uint32_t>(f16[i] & 0x3FF) << 13);
    std::memcpy(&f16_as_f32[i], &bits, 4);
  }
  ModelState init = InitModelState(model, opt, 9);
  auto a = MakeCpu(init, opt, 8), b = MakeCpu(init, opt, 8), c = MakeCpu(init, opt, 8);
  BatchView u8 = U8Batch(exact, 0, 8, 16);
  BatchView as_f32 = u8, as_f16 = u8, f16f32 = u8;
  as_f32.sample.dtype = H2DFormat::kF32;
  as_f32.samples = f32.data();
  as_f16.sample.dtype = H2DFormat::kF16;
  as_f16.samples = f16.data();
  f16f32.sample.dtype = H2DFormat::kF32;
  f16f32.samples = f16_as_f32.data();
  ASSERT_TRUE(a->TrainStep(u8, 0.1f).ok());
  ASSERT_TRUE(b->TrainStep(as_f32, 0.1f).ok());
  EXPECT_EQ(a->SaveState()->params[0].values, b->SaveState()->params[0].values);
  auto d2 = MakeCpu(init, opt, 8);
  ASSERT_TRUE(c->TrainStep(as_f16, 0.1f).ok());
  ASSERT_TRUE(d2->TrainStep(f16f32, 0.1f).ok());
  EXPECT_EQ(c->SaveState()->params[0].values, d2->SaveState()->params[0].values);
}

TEST(CpuBackendTest, SameInputsGiveBitwiseIdenticalWeights) {
  OptimizerConfig opt;
  opt.kind = OptimizerKind::kAdamW;
  ModelConfig model;
  const Dataset d = MakeDataset(64, 784, 10, 0.5, 3);
  ModelState init = InitModelState(model, opt, 4);
  auto a = MakeCpu(init, opt, 32), b = MakeCpu(init, opt, 32);
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(a->TrainStep(U8Batch(d, 32 * s, 32, 784), 0.01f).ok());
    ASSERT_TRUE(b->TrainStep(U8Batch(d, 32 * s, 32, 784), 0.01f).ok());
  }
  auto sa = a->SaveState(), sb = b->SaveState();
  for (size_t p = 0; p < sa->params.size(); ++p) {
    EXPECT_EQ(0, std::memcmp(sa->params[p].values.data(), sb->params[p].values.data(),
                             4 * sa->params[p].values.size()));
  }
}

TEST(CpuBackendTest, LearnsSeparableProblemToHighAccuracy) {
  OptimizerConfig opt;
  opt.lr = 0.1f;
  ModelConfig model;
  model.layers = {100, 32, 10};
  const Dataset train = MakeDataset(2000, 100, 10, 0, 21, /*separable=*/true);
  const Dataset test = MakeDataset(500, 100, 10, 0, 22, /*separable=*/true);
  auto backend = MakeCpu(InitModelState(model, opt, 1), opt, 32);
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int s = 0; s + 32 <= 2000; s += 32) {
      ASSERT_TRUE(backend->TrainStep(U8Batch(train, s, 32, 100), opt.lr).ok());
    }
  }
  auto loss = backend->TakeLoss();
  ASSERT_TRUE(loss.ok());
  EXPECT_GT(loss->samples, 0);
  EvalStats stats;
  for (int s = 0; s < 500; s += 25) {
    ASSERT_TRUE(backend->Evaluate(U8Batch(test, s, 25, 100), &stats).ok());
  }
  EXPECT_EQ(stats.samples, 500);
  EXPECT_GT(stats.accuracy(), 0.95) << "test loss " << stats.loss_sum / stats.samples;
}

TEST(CpuBackendTest, RejectsReducedPrecision) {
  OptimizerConfig opt;
  BackendOptions options;
  options.precision = Precision::kBF16;
  auto backend = CreateCpuBackend(InitModelState(ModelConfig{}, opt, 1), opt, options);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("fp32"));
}

TEST(CpuBackendTest, RejectsBatchesThatDoNotFitTheModel) {
  OptimizerConfig opt;
  ModelConfig model;
  model.layers = {10, 4, 3};
  auto backend = MakeCpu(InitModelState(model, opt, 1), opt, 4);
  Dataset d = MakeDataset(8, 10, 3, 0.5, 1);
  EXPECT_EQ(backend->TrainStep(U8Batch(d, 0, 5, 10), 0.1f).code(),
            absl::StatusCode::kInvalidArgument);  // larger than max_batch
  EXPECT_EQ(backend->TrainStep(U8Batch(d, 0, 4, 9), 0.1f).code(),
            absl::StatusCode::kInvalidArgument);  // wrong feature count
  const ModelState before = *backend->SaveState();
  d.labels[2] = 3;
  absl::Status bad_label = backend->TrainStep(U8Batch(d, 0, 4, 10), 0.1f);
  EXPECT_EQ(bad_label.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_label.message()), HasSubstr("label 3"));
  EXPECT_EQ(backend->SaveState()->params[0].values, before.params[0].values);  // untouched
}

TEST(CpuBackendTest, LoadStateRejectsMismatchedShapes) {
  OptimizerConfig opt;
  auto backend = MakeCpu(InitModelState(ModelConfig{}, opt, 1), opt, 4);
  ModelConfig other;
  other.layers = {784, 64, 10};
  EXPECT_EQ(backend->LoadState(InitModelState(other, opt, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  OptimizerConfig momentum;
  momentum.momentum = 0.9f;
  EXPECT_EQ(backend->LoadState(InitModelState(ModelConfig{}, momentum, 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CreateBackendTest, AutoFallsBackToCpuAndCudaIsUnavailableWithoutIt) {
  if (device::CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  OptimizerConfig opt;
  const ModelState state = InitModelState(ModelConfig{}, opt, 1);
  auto on = [&](absl::string_view device) -> absl::StatusOr<std::unique_ptr<Backend>> {
    ASSIGN_OR_RETURN(device::DeviceSpec spec, device::ParseDeviceSpec(device));
    BackendSpec backend;
    backend.device = spec;
    return CreateBackend(backend, state, opt);
  };
  auto cpu = on("auto");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->platform(), device::Platform::kCpu);
  EXPECT_EQ(on("cuda").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(on("cuda:1").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(on("gpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(on("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePrecision("fp8").status().code(), absl::StatusCode::kInvalidArgument);
}

// The start-up memory check (engine/job/run_limits.cc) counts what the backend allocates:
// every tagged buffer, workspace included (a per-thread copy of the first layer's weight
// gradients with the sparse kernels: ~4x the parameters at 3 threads, where the formula says 2x).
TEST(CpuBackendTest, AllocationBytesAreWhatTheBackendAllocates) {
  ModelConfig model;
  model.layers = {300, 64, 32, 10};
  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    for (const int threads : {1, 3}) {
      for (const int max_batch : {1, 17, 64}) {
        OptimizerConfig opt;
        opt.kind = kind;
        const ModelState state = InitModelState(model, opt, 1);
        std::unique_ptr<Backend> backend = MakeCpu(state, opt, max_batch, threads);
        ASSERT_NE(backend, nullptr);
        EXPECT_EQ(CpuBackendAllocationBytes(model, opt, max_batch, threads),
                  static_cast<uint64_t>(backend->memory().total_peak))
            << "threads " << threads << " max_batch " << max_batch;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
