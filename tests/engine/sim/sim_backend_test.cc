// The sim backend runs the CPU backend's kernels on a simulated device's compute stream: the
// same results bit for bit, whether batches arrive as host batches or as device batches
// uploaded on another stream and handed over with a ready event, with poison and jitter on.
#include <memory>
#include <vector>

#include "common/status_macros.h"
#include "device/device.h"
#include "device/sim/sim_device.h"
#include "engine/backend.h"
#include "engine/backend_factory.h"
#include "engine/model.h"
#include "gtest/gtest.h"
#include "tests/engine/test_util.h"

namespace sluice {
namespace {

// The backend `device` names (parsed as --device is), with `spec`'s settings.
absl::StatusOr<std::unique_ptr<Backend>> Create(absl::string_view device, const ModelState& init,
                                                const OptimizerConfig& opt, BackendSpec spec) {
  ASSIGN_OR_RETURN(spec.device, device::ParseDeviceSpec(device));
  return CreateBackend(spec, init, opt);
}

constexpr int kFeatures = 784;
constexpr int kBatch = 32;

OptimizerConfig Momentum() {
  OptimizerConfig o;
  o.lr = 0.01f;
  o.momentum = 0.9f;
  return o;
}

void ExpectBitwiseEqual(const ModelState& a, const ModelState& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    ASSERT_EQ(a.params[i].values, b.params[i].values) << a.params[i].name;
  }
  ASSERT_EQ(a.opt_state.size(), b.opt_state.size());
  for (size_t i = 0; i < a.opt_state.size(); ++i) {
    ASSERT_EQ(a.opt_state[i].values, b.opt_state[i].values) << a.opt_state[i].name;
  }
  EXPECT_EQ(a.optimizer_steps, b.optimizer_steps);
}

TEST(SimBackend, HostBatchesGiveBitwiseTheCpuResult) {
  const testing::Dataset d = testing::MakeDataset(20 * kBatch, kFeatures, 10, 0.5, 1);
  const OptimizerConfig opt = Momentum();
  const ModelState init = InitModelState(ModelConfig{}, opt, 5);
  BackendSpec bo;
  bo.options.max_batch = kBatch;
  auto cpu = Create("cpu", init, opt, bo);
  auto sim = Create("sim", init, opt, bo);
  ASSERT_TRUE(cpu.ok() && sim.ok()) << cpu.status() << sim.status();
  EXPECT_EQ((*cpu)->device(), nullptr);
  ASSERT_NE((*sim)->device(), nullptr);
  EXPECT_EQ((*sim)->device()->platform(), device::Platform::kSim);
  for (int s = 0; s < 20; ++s) {
    const BatchView v = testing::U8Batch(d, s * kBatch, kBatch, kFeatures);
    ASSERT_TRUE((*cpu)->TrainStep(v, 0.01f).ok());
    ASSERT_TRUE((*sim)->TrainStep(v, 0.01f).ok());
  }
  auto a = (*cpu)->SaveState();
  auto b = (*sim)->SaveState();
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectBitwiseEqual(*a, *b);
  auto la = (*cpu)->TakeLoss();
  auto lb = (*sim)->TakeLoss();
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_EQ(la->mean_loss, lb->mean_loss);
  EXPECT_EQ(la->correct, lb->correct);
}

// What the pipeline does: copies on a copy stream of the backend's device into two slots, a
// ready event per slot, the slot reused only after the compute stream's released event.
TEST(SimBackend, DeviceBatchesWithPoisonAndJitterGiveBitwiseTheCpuResult) {
  const testing::Dataset d = testing::MakeDataset(24 * kBatch, kFeatures, 10, 0.5, 2);
  const OptimizerConfig opt = Momentum();
  const ModelState init = InitModelState(ModelConfig{}, opt, 6);
  BackendSpec bo;
  bo.options.max_batch = kBatch;
  bo.sim.device.link_bytes_per_s = 2e8;  // copies take ~125 us: long enough to be caught mid-way
  bo.sim.device.poison = true;
  bo.sim.device.jitter_seed = 11;
  bo.sim.device.jitter_max_ns = 100'000;
  auto cpu = Create("cpu", init, opt, bo);
  auto sim = Create("sim", init, opt, bo);
  ASSERT_TRUE(cpu.ok() && sim.ok()) << cpu.status() << sim.status();
  device::Device* dev = (*sim)->device();
  auto copy = dev->CreateStream();
  ASSERT_TRUE(copy.ok());
  struct Slot {
    device::Buffer samples, labels;
    std::unique_ptr<device::Event> ready, released;
    bool used = false;
  };
  std::vector<Slot> slots(2);
  for (Slot& s : slots) {
    s.samples = *dev->Allocate(kBatch * kFeatures);
    s.labels = *dev->Allocate(kBatch * 4);
    s.ready = *dev->CreateEvent(false);
    s.released = *dev->CreateEvent(false);
  }
  for (int b = 0; b < 24; ++b) {
    Slot& s = slots[b % 2];
    const BatchView host = testing::U8Batch(d, b * kBatch, kBatch, kFeatures);
    if (s.used) {
      ASSERT_TRUE((*copy)->Wait(s.released.get()).ok());
    }
    ASSERT_TRUE((*copy)->CopyToDevice(s.samples.data(), host.samples, kBatch * kFeatures).ok());
    ASSERT_TRUE((*copy)->CopyToDevice(s.labels.data(), host.labels, kBatch * 4).ok());
    ASSERT_TRUE((*copy)->Record(s.ready.get()).ok());
    BatchView v = host;
    v.samples = s.samples.data();
    v.labels = static_cast<const int32_t*>(s.labels.data());
    v.on_device = true;
    v.ready_event = s.ready.get();
    ASSERT_TRUE((*sim)->TrainStep(v, 0.01f).ok());
    ASSERT_TRUE((*sim)->compute_stream()->Record(s.released.get()).ok());
    s.used = true;
    ASSERT_TRUE((*cpu)->TrainStep(host, 0.01f).ok());
  }
  auto a = (*cpu)->SaveState();
  auto b = (*sim)->SaveState();
  ASSERT_TRUE(a.ok() && b.ok());
  ExpectBitwiseEqual(*a, *b);
}

TEST(SimBackend, ModelledComputeTimeIsTheFloorOfAStep) {
  const testing::Dataset d = testing::MakeDataset(kBatch, kFeatures, 10, 0.5, 3);
  const OptimizerConfig opt = Momentum();
  BackendSpec bo;
  bo.options.max_batch = kBatch;
  bo.sim.compute_ns_per_step = 4'000'000;
  auto sim = Create("sim", InitModelState(ModelConfig{}, opt, 1), opt, bo);
  ASSERT_TRUE(sim.ok()) << sim.status();
  device::Device* dev = (*sim)->device();
  auto a = *dev->CreateEvent(true);
  auto b = *dev->CreateEvent(true);
  ASSERT_TRUE((*sim)->compute_stream()->Record(a.get()).ok());
  ASSERT_TRUE((*sim)->TrainStep(testing::U8Batch(d, 0, kBatch, kFeatures), 0.01f).ok());
  ASSERT_TRUE((*sim)->compute_stream()->Record(b.get()).ok());
  ASSERT_TRUE((*sim)->Synchronize().ok());
  EXPECT_GE(*b->NanosSince(*a), 4'000'000);
}

TEST(SimBackend, BadDeviceNamesAndOptionsAreRejected) {
  const OptimizerConfig opt = Momentum();
  const ModelState init = InitModelState(ModelConfig{}, opt, 1);
  BackendSpec bo;
  EXPECT_EQ(Create("sim:x", init, opt, bo).status().code(), absl::StatusCode::kInvalidArgument);
  bo.sim.compute_ns_per_step = -1;
  EXPECT_EQ(Create("sim", init, opt, bo).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice
