// The CUDA backend end to end against the CPU backend from the same InitModelState: one step,
// 50 steps (fp32 tight, bf16/fp16 loose), CUDA Graph on vs off, device batches with a ready
// event, u8 input, evaluation, memory accounting vs ComputeMemoryFormula, SaveState/LoadState.
// Label gpu: skips, saying why, without a device.
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/memory.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace sluice {
namespace {

using testing_cuda::AllClose;
using testing_cuda::DeviceVector;
using testing_cuda::RandomBytes;
using testing_cuda::RandomFloats;
using testing_cuda::RandomLabels;

constexpr int kFeatures = 784;

// A fixed stream of synthetic batches: f32 (already normalized) and the u8 they came from.
struct Batches {
  std::vector<std::vector<uint8_t>> u8;
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<int32_t>> labels;
  std::vector<int> sizes;
  BatchView View(size_t i, H2DFormat format) const {
    BatchView v;
    v.sample.dtype = format;
    v.samples = format == H2DFormat::kU8 ? static_cast<const void*>(u8[i].data())
                                         : static_cast<const void*>(f32[i].data());
    v.labels = labels[i].data();
    v.size = sizes[i];
    v.sample = FlatSampleSpec(v.sample.dtype, kFeatures);
    v.step = i;
    return v;
  }
};

Batches MakeBatches(int count, int batch, int last_size = 0) {
  Batches b;
  for (int i = 0; i < count; ++i) {
    const int size = (i == count - 1 && last_size > 0) ? last_size : batch;
    b.sizes.push_back(size);
    b.u8.push_back(RandomBytes(static_cast<size_t>(size) * kFeatures, 1000 + i));
    std::vector<float> f(b.u8.back().size());
    for (size_t k = 0; k < f.size(); ++k) f[k] = b.u8.back()[k] / 255.0f;
    b.f32.push_back(std::move(f));
    b.labels.push_back(RandomLabels(size, 10, 2000 + i));
  }
  return b;
}

struct Config {
  std::string name;
  OptimizerConfig opt;
  Precision precision = Precision::kF32;
  float atol = 2e-5f, rtol = 1e-3f;  // fp32: GEMM summation order differs from OpenBLAS
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

OptimizerConfig Sgd(float momentum = 0, bool nesterov = false, float wd = 0) {
  OptimizerConfig o;
  o.lr = 0.01f;
  o.momentum = momentum;
  o.nesterov = nesterov;
  o.weight_decay = wd;
  return o;
}
OptimizerConfig AdamW() {
  OptimizerConfig o;
  o.kind = OptimizerKind::kAdamW;
  o.lr = 1e-3f;
  o.weight_decay = 0.01f;
  return o;
}

std::unique_ptr<Backend> MakeCuda(const ModelState& s, const OptimizerConfig& o,
                                  BackendOptions options, CudaBackendOptions cuda = {}) {
  auto b = CreateCudaBackend(s, o, options, cuda);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}
std::unique_ptr<Backend> MakeCpu(const ModelState& s, const OptimizerConfig& o,
                                 BackendOptions options) {
  options.precision = Precision::kF32;
  auto b = CreateCpuBackend(s, o, options, {.threads = 1});
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? std::move(*b) : nullptr;
}

void ExpectSameState(const ModelState& got, const ModelState& ref, float atol, float rtol) {
  ASSERT_EQ(got.params.size(), ref.params.size());
  for (size_t i = 0; i < ref.params.size(); ++i) {
    EXPECT_EQ(got.params[i].name, ref.params[i].name);
    EXPECT_EQ(got.params[i].shape, ref.params[i].shape);
    EXPECT_TRUE(
        AllClose(got.params[i].values, ref.params[i].values, atol, rtol, ref.params[i].name));
  }
  ASSERT_EQ(got.opt_state.size(), ref.opt_state.size());
  for (size_t i = 0; i < ref.opt_state.size(); ++i) {
    EXPECT_TRUE(AllClose(got.opt_state[i].values, ref.opt_state[i].values, atol, rtol,
                         ref.opt_state[i].name));
  }
  EXPECT_EQ(got.optimizer_steps, ref.optimizer_steps);
}

class CudaVsCpuTest : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override { SLUICE_SKIP_WITHOUT_CUDA(); }
};

TEST_P(CudaVsCpuTest, OneStepAndFiftyStepsMatchCpuBackend) {
  const Config& c = GetParam();
  ModelConfig model;
  ModelState init = InitModelState(model, c.opt, 42);
  BackendOptions options;
  options.max_batch = 32;
  options.precision = c.precision;
  auto cuda = MakeCuda(init, c.opt, options);
  auto cpu = MakeCpu(init, c.opt, options);
  ASSERT_TRUE(cuda && cpu);
  Batches data = MakeBatches(50, 32, /*last_size=*/17);  // the last batch of an epoch is short

  for (int i = 0; i < 50; ++i) {
    const float lr = LearningRateAt(c.opt, i);
    ASSERT_TRUE(cuda->TrainStep(data.View(i, H2DFormat::kF32), lr).ok());
    ASSERT_TRUE(cpu->TrainStep(data.View(i, H2DFormat::kF32), lr).ok());
    if (i == 0) {
      auto a = cuda->SaveState();
      auto b = cpu->SaveState();
      ASSERT_TRUE(a.ok() && b.ok());
      SCOPED_TRACE("after one step");
      ExpectSameState(*a, *b, c.atol, c.rtol);
    }
  }
  auto loss_cuda = cuda->TakeLoss();
  auto loss_cpu = cpu->TakeLoss();
  ASSERT_TRUE(loss_cuda.ok()) << loss_cuda.status();
  ASSERT_TRUE(loss_cpu.ok());
  EXPECT_EQ(loss_cuda->samples, loss_cpu->samples);
  EXPECT_NEAR(loss_cuda->mean_loss, loss_cpu->mean_loss,
              c.precision == Precision::kF32 ? 1e-4 : 2e-2);
  if (c.precision == Precision::kF32) {
    EXPECT_NEAR(loss_cuda->correct, loss_cpu->correct, 2);
  }
  auto a = cuda->SaveState();
  auto b = cpu->SaveState();
  ASSERT_TRUE(a.ok() && b.ok());
  SCOPED_TRACE("after 50 steps");
  ExpectSameState(*a, *b, c.atol, c.rtol);

  EvalStats ev_cuda, ev_cpu;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cuda->Evaluate(data.View(i, H2DFormat::kF32), &ev_cuda).ok());
    ASSERT_TRUE(cpu->Evaluate(data.View(i, H2DFormat::kF32), &ev_cpu).ok());
  }
  EXPECT_EQ(ev_cuda.samples, ev_cpu.samples);
  EXPECT_NEAR(ev_cuda.loss_sum, ev_cpu.loss_sum, 1e-3 * ev_cpu.loss_sum * (c.atol > 1e-4 ? 20 : 1));
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, CudaVsCpuTest,
    ::testing::Values(Config{"sgd", Sgd()}, Config{"sgd_momentum_wd", Sgd(0.9f, false, 5e-4f)},
                      Config{"sgd_nesterov", Sgd(0.9f, true)}, Config{"adamw", AdamW()},
                      // bf16 keeps 8 mantissa bits, fp16 11: the update differs by a few %.
                      Config{"sgd_bf16", Sgd(), Precision::kBF16, 2e-3f, 5e-2f},
                      Config{"sgd_fp16", Sgd(), Precision::kF16, 1e-3f, 2e-2f},
                      // AdamW normalizes the update, so an element whose gradient is below
                      // bf16's rounding noise (or a ReLU that flips) moves by up to lr per
                      // step: a loose sanity bound; the loss comparison is the real check.
                      Config{"adamw_bf16", AdamW(), Precision::kBF16, 1e-2f, 1e-1f}),
    [](const auto& param_info) { return param_info.param.name; });

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { SLUICE_SKIP_WITHOUT_CUDA(); }
};

TEST_F(CudaBackendTest, CudaGraphOnAndOffGiveTheSameWeights) {
  OptimizerConfig opt = Sgd(0.9f);
  ModelState init = InitModelState(ModelConfig{}, opt, 7);
  auto eager = MakeCuda(init, opt, BackendOptions{});
  auto graphed = MakeCuda(init, opt, BackendOptions{}, {.cuda_graph = true});
  ASSERT_TRUE(eager && graphed);
  Batches data = MakeBatches(20, 32, /*last_size=*/9);
  for (int i = 0; i < 20; ++i) {
    const float lr = 0.01f * (1.0f - i / 40.0f);  // lr changes each step: must reach the graph
    ASSERT_TRUE(eager->TrainStep(data.View(i, H2DFormat::kU8), lr).ok());
    ASSERT_TRUE(graphed->TrainStep(data.View(i, H2DFormat::kU8), lr).ok());
  }
  auto a = eager->SaveState();
  auto b = graphed->SaveState();
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectSameState(*b, *a, 1e-7f, 1e-6f);
  auto la = eager->TakeLoss();
  auto lb = graphed->TakeLoss();
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_NEAR(la->mean_loss, lb->mean_loss, 1e-6);
  EXPECT_EQ(la->correct, lb->correct);
}

TEST_F(CudaBackendTest, U8DeviceBatchWithReadyEventMatchesCpuOnU8) {
  OptimizerConfig opt = Sgd();
  ModelState init = InitModelState(ModelConfig{}, opt, 3);
  BackendOptions options;
  const Normalization norm{{0.2860f}, {0.3530f}};
  auto cuda = MakeCuda(init, opt, options);
  auto cpu = MakeCpu(init, opt, options);
  ASSERT_TRUE(cuda && cpu);
  Batches data = MakeBatches(10, 32);
  // What the pipeline does, through the device layer: async copies on the backend device's
  // own copy stream, an event recorded after them and handed over with the batch.
  device::Device* dev = cuda->device();
  ASSERT_NE(dev, nullptr);
  auto copy_stream = dev->CreateStream();
  ASSERT_TRUE(copy_stream.ok()) << copy_stream.status();
  auto ready = dev->CreateEvent(/*timing=*/false);
  ASSERT_TRUE(ready.ok()) << ready.status();
  DeviceVector<uint8_t> slot(32 * kFeatures);
  DeviceVector<int32_t> slot_labels(32);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        (*copy_stream)->CopyToDevice(slot.get(), data.u8[i].data(), data.u8[i].size()).ok());
    ASSERT_TRUE(
        (*copy_stream)->CopyToDevice(slot_labels.get(), data.labels[i].data(), 32 * 4).ok());
    ASSERT_TRUE((*copy_stream)->Record(ready->get()).ok());
    BatchView v = data.View(i, H2DFormat::kU8);
    v.normalization = &norm;
    BatchView host = v;
    v.samples = slot.get();
    v.labels = slot_labels.get();
    v.on_device = true;
    v.ready_event = ready->get();
    ASSERT_TRUE(cuda->TrainStep(v, 0.01f).ok());
    ASSERT_TRUE(cuda->Synchronize().ok());  // the slot is reused by the next iteration
    ASSERT_TRUE(cpu->TrainStep(host, 0.01f).ok());
  }
  auto a = cuda->SaveState();
  auto b = cpu->SaveState();
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectSameState(*a, *b, 2e-5f, 1e-3f);
}

TEST_F(CudaBackendTest, MemoryAccountingEqualsFormula) {
  for (const OptimizerConfig& opt : {Sgd(), Sgd(0.9f), AdamW()}) {
    for (int max_batch : {32, 256}) {
      for (Precision p : {Precision::kF32, Precision::kBF16}) {
        ModelState init = InitModelState(ModelConfig{}, opt, 1);
        BackendOptions options;
        options.max_batch = max_batch;
        options.precision = p;
        auto cuda = MakeCuda(init, opt, options);
        ASSERT_TRUE(cuda);
        const MemoryReport r = cuda->memory();
        const MemoryFormula f = ComputeMemoryFormula(ModelConfig{}, opt, max_batch);
        SCOPED_TRACE(FormatMemoryReport(r, f));
        EXPECT_EQ(r.bytes(MemoryTag::kParameters), f.parameters);
        EXPECT_EQ(r.bytes(MemoryTag::kGradients), f.gradients);
        EXPECT_EQ(r.bytes(MemoryTag::kOptimizerState), f.optimizer_state);
        EXPECT_EQ(r.bytes(MemoryTag::kActivations), f.activations);
        EXPECT_GT(r.bytes(MemoryTag::kInputBatches), 0);
        EXPECT_GT(r.bytes(MemoryTag::kWorkspace), 0);
        EXPECT_EQ(r.total_current, r.total_peak);  // everything allocated once, up front
        int64_t sum = 0;
        for (int64_t b : r.current_bytes) sum += b;
        EXPECT_EQ(sum, r.total_current);
      }
    }
  }
}

TEST_F(CudaBackendTest, SaveLoadRoundTripResumesIdentically) {
  OptimizerConfig opt = AdamW();
  ModelState init = InitModelState(ModelConfig{}, opt, 11);
  BackendOptions options;
  auto a = MakeCuda(init, opt, options);
  ASSERT_TRUE(a);
  Batches data = MakeBatches(10, 32);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(a->TrainStep(data.View(i, H2DFormat::kF32), 1e-3f).ok());
  auto saved = a->SaveState();
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->optimizer_steps, 5);

  auto b = MakeCuda(InitModelState(ModelConfig{}, opt, 999), opt, options);
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->LoadState(*saved).ok());
  auto reread = b->SaveState();
  ASSERT_TRUE(reread.ok());
  ExpectSameState(*reread, *saved, 0.0f, 0.0f);  // bitwise

  for (int i = 5; i < 10; ++i) {
    ASSERT_TRUE(a->TrainStep(data.View(i, H2DFormat::kF32), 1e-3f).ok());
    ASSERT_TRUE(b->TrainStep(data.View(i, H2DFormat::kF32), 1e-3f).ok());
  }
  auto fa = a->SaveState();
  auto fb = b->SaveState();
  ASSERT_TRUE(fa.ok() && fb.ok());
  ExpectSameState(*fb, *fa, 0.0f, 0.0f);
}

// LoadState's copies land before the compute stream makes the bf16 weight copy from them: a
// large state (80 MB of pageable memory) whose last layer predicts class 3 for every sample
// (zero weights, bias 10 on class 3), loaded over a random model, evaluates exactly as the
// CPU backend does with it. A copy not ordered before the cast leaves the random model's
// weights in the bf16 copy, and its predictions vary.
TEST_F(CudaBackendTest, LoadStateLandsBeforeTheBf16WeightCopyIsMade) {
  OptimizerConfig opt = Sgd();
  ModelConfig big;
  big.layers = {784, 4096, 4096, 10};
  ModelState fixed = InitModelState(big, opt, 5);
  HostTensor& last_w = fixed.params[fixed.params.size() - 2];
  HostTensor& last_b = fixed.params.back();
  std::fill(last_w.values.begin(), last_w.values.end(), 0.0f);
  std::fill(last_b.values.begin(), last_b.values.end(), 0.0f);
  last_b.values[3] = 10.0f;
  BackendOptions options;
  options.max_batch = 256;
  options.precision = Precision::kBF16;
  auto gpu = MakeCuda(InitModelState(big, opt, 6), opt, options);
  ASSERT_TRUE(gpu);
  ASSERT_TRUE(gpu->LoadState(fixed).ok());
  auto cpu = MakeCpu(fixed, opt, options);
  ASSERT_TRUE(cpu);
  Batches data = MakeBatches(1, 256);
  EvalStats on_gpu, on_cpu;
  ASSERT_TRUE(gpu->Evaluate(data.View(0, H2DFormat::kU8), &on_gpu).ok());
  ASSERT_TRUE(cpu->Evaluate(data.View(0, H2DFormat::kU8), &on_cpu).ok());
  EXPECT_EQ(on_gpu.samples, 256);
  EXPECT_EQ(on_gpu.correct, on_cpu.correct);
  EXPECT_NEAR(on_gpu.loss_sum, on_cpu.loss_sum, 1e-3 * on_cpu.loss_sum);
}

TEST_F(CudaBackendTest, LoadStateRejectsWrongShapes) {
  OptimizerConfig opt = Sgd();
  auto a = MakeCuda(InitModelState(ModelConfig{}, opt, 1), opt, BackendOptions{});
  ASSERT_TRUE(a);
  ModelConfig other;
  other.layers = {784, 64, 10};
  EXPECT_EQ(a->LoadState(InitModelState(other, opt, 1)).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaBackendTest, LabelOutOfRangeIsReportedByTakeLoss) {
  OptimizerConfig opt = Sgd();
  auto a = MakeCuda(InitModelState(ModelConfig{}, opt, 1), opt, BackendOptions{});
  ASSERT_TRUE(a);
  Batches data = MakeBatches(1, 32);
  data.labels[0][5] = 10;
  ASSERT_TRUE(a->TrainStep(data.View(0, H2DFormat::kF32), 0.01f).ok());
  EXPECT_EQ(a->TakeLoss().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a->TakeLoss().ok());  // the flag is cleared once reported
}

TEST_F(CudaBackendTest, BatchLargerThanMaxBatchIsInvalidArgument) {
  OptimizerConfig opt = Sgd();
  BackendOptions options;
  options.max_batch = 16;
  auto a = MakeCuda(InitModelState(ModelConfig{}, opt, 1), opt, options);
  ASSERT_TRUE(a);
  Batches data = MakeBatches(1, 32);
  EXPECT_EQ(a->TrainStep(data.View(0, H2DFormat::kF32), 0.01f).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a->name().find("cuda:0"), std::string::npos) << a->name();
  EXPECT_NE(a->compute_stream(), nullptr);
  ASSERT_NE(a->device(), nullptr);
  EXPECT_EQ(a->device()->platform(), device::Platform::kCuda);
}

}  // namespace
}  // namespace sluice
