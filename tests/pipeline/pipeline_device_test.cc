// The pipeline's device half (upload on a copy stream, the device ring, ready events, releases
// with the consumer's stream), written against the device layer only. Built twice: as
// pipeline_device_test on the simulated device (every CI run, also under the sanitizers) and as
// pipeline_gpu_test on CUDA device 0 (label gpu; skips, saying why, without one).
#include <algorithm>
#include <memory>
#include <vector>

#include "common/status_macros.h"
#include "device/device.h"
#include "device/sim/sim_device.h"
#include "gtest/gtest.h"
#include "tests/pipeline/test_util.h"

namespace sluice::testing {
namespace {

#ifndef SLUICE_TEST_CUDA
#define SLUICE_TEST_CUDA 0
#endif

// The device under test, or skips saying why.
#define OPEN_DEVICE_OR_SKIP(dev, sim_options)                                              \
  std::unique_ptr<device::Device> dev;                                                     \
  do {                                                                                     \
    auto opened =                                                                          \
        SLUICE_TEST_CUDA ? device::OpenCudaDevice(0) : device::OpenSimDevice(sim_options); \
    if (!opened.ok()) GTEST_SKIP() << opened.status().message();                           \
    dev = *std::move(opened);                                                              \
  } while (0)

// Runs `o` on the device and copies every batch back to the host through the device layer,
// releasing each lease with the consumer's stream (as the trainer does).
absl::StatusOr<std::vector<Batch>> RunOnDevice(const Dataset* dataset, PipelineOptions o,
                                               device::Device* dev, PipelineStats* stats) {
  o.placement.device = dev;
  ASSIGN_OR_RETURN(auto p, Pipeline::Create(dataset, o));
  if (!p->uploads_to_device()) return absl::InternalError("the pipeline does not upload");
  ASSIGN_OR_RETURN(auto stream, dev->CreateStream());
  std::vector<Batch> got;
  BatchLease lease;
  while (true) {
    ASSIGN_OR_RETURN(bool more, p->Next(&lease));
    if (!more) break;
    const BatchView& v = lease.view();
    if (!v.on_device || v.ready_event == nullptr) return absl::InternalError("not a device batch");
    RETURN_IF_ERROR(stream->Wait(v.ready_event));
    std::vector<char> samples(size_t{v.size} * v.sample.values() * H2DFormatSize(v.sample.dtype));
    std::vector<int32_t> labels(v.size);
    RETURN_IF_ERROR(stream->CopyToHost(samples.data(), v.samples, samples.size()));
    RETURN_IF_ERROR(stream->CopyToHost(labels.data(), v.labels, labels.size() * 4));
    RETURN_IF_ERROR(stream->Synchronize());
    BatchView hv = v;
    hv.samples = samples.data();
    hv.labels = labels.data();
    got.push_back(ToBatch(hv));
    // Record ids stay in host memory, and name the samples that came back from the device.
    if (v.size > 0 && (v.record_ids == nullptr ||
                       !std::equal(got.back().ids.begin(), got.back().ids.end(), v.record_ids))) {
      return absl::InternalError("record ids disagree with the device batch's samples");
    }
    lease.Release(stream.get());
  }
  if (stats != nullptr) *stats = p->Stats();
  return got;
}

TEST(PipelineDevice, DeviceBatchesMatchHostBatches) {
  device::SimOptions sim;
  sim.link_bytes_per_s = 2e9;
  OPEN_DEVICE_OR_SKIP(dev, sim);
  TestDataset data(300, 128, 16);
  PipelineOptions o;
  o.order.batch_size = 7;
  o.resources.threads = 2;
  o.resources.device_ring_depth = 2;
  auto host = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(host.ok()) << host.status();
  PipelineStats s;
  auto got = RunOnDevice(data.dataset.get(), o, dev.get(), &s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *host);
  EXPECT_EQ(s[Stage::kH2D].items, got->size());
  EXPECT_GT(s[Stage::kH2D].bytes, 0u);
  EXPECT_GT(s[Stage::kH2D].busy_ns, 0);
  // The h2d queue is the batches waiting for a ring slot: bounded by the pinned pool, not by
  // the ring (this test never ran before the simulated device; it asserted <= ring depth).
  EXPECT_LE(s[Stage::kH2D].queue_high_water, s.pool_buffers);
  EXPECT_EQ(s.ring_depth, 2u);
}

// A data-parallel rank on the device: its slices, empty last ones included, go through the
// ring in lockstep and carry their record ids (checked in RunOnDevice) like host batches.
TEST(PipelineDevice, DataParallelSlicesMatchHostSlices) {
  device::SimOptions sim;
  sim.link_bytes_per_s = 2e9;
  OPEN_DEVICE_OR_SKIP(dev, sim);
  TestDataset data(250, 100, 16);  // B 8: the last global batch holds 2 samples, for 3 ranks
  PipelineOptions o;
  o.order.batch_size = 8;
  o.resources.threads = 2;
  o.resources.device_ring_depth = 2;
  for (uint32_t r = 0; r < 3; ++r) {
    o.slice = DataParallelSlice{r, 3};
    auto host = RunAll(data.dataset.get(), o);
    ASSERT_TRUE(host.ok()) << host.status();
    auto got = RunOnDevice(data.dataset.get(), o, dev.get(), nullptr);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, *host) << "rank " << r;
    ASSERT_EQ(got->size(), 32u) << "rank " << r;
    EXPECT_EQ(got->back().ids.size(), r < 2 ? 1u : 0u) << "rank " << r;
  }
}

// Poison and jitter: a slot read before its ready event, or reused before its reader's
// release event, would show 0xFF bytes; shuffled timing must not change a single batch.
TEST(PipelineDevice, PoisonAndJitterNeverReachAReader) {
  device::SimOptions sim;
  sim.link_bytes_per_s = 1e9;
  sim.poison = true;
  sim.jitter_seed = 7;
  OPEN_DEVICE_OR_SKIP(dev, sim);
  TestDataset data(600, 200, 16);
  PipelineOptions o;
  o.order.batch_size = 16;
  o.order.shuffle = true;
  o.order.seed = 3;
  o.resources.threads = 2;
  o.resources.device_ring_depth = 2;
  o.span.epochs = 2;
  auto host = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(host.ok()) << host.status();
  auto got = RunOnDevice(data.dataset.get(), o, dev.get(), nullptr);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *host);
}

// An all-corrupt batch anywhere, the last one included, must not end the run before the
// batches ahead of it that still wait for a device slot.
TEST(PipelineDevice, AllCorruptLastBatchDoesNotOvertakeEarlierBatches) {
  device::SimOptions sim;
  sim.link_bytes_per_s = 2e8;  // slow copies: earlier batches are still queued for a slot
  OPEN_DEVICE_OR_SKIP(dev, sim);
  TestDataset data(160, 160, 16);  // 10 frames; batch 16 without shuffle = frame i
  data.CorruptFrame(0, 9);         // the last batch is all corrupt
  data.CorruptFrame(0, 4);         // and one in the middle
  PipelineOptions o;
  o.order.batch_size = 16;
  o.order.shuffle = false;
  o.on_corrupt = OnCorrupt::kSkip;
  o.resources.threads = 2;
  o.resources.device_ring_depth = 1;
  auto host = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_EQ(host->size(), 8u);
  PipelineStats s;
  auto got = RunOnDevice(data.dataset.get(), o, dev.get(), &s);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *host);
  EXPECT_EQ(s.empty_batches, 2u);
}

TEST(PipelineDevice, CancelWithCopiesInFlight) {
  device::SimOptions sim;
  sim.link_bytes_per_s = 1e8;
  OPEN_DEVICE_OR_SKIP(dev, sim);
  TestDataset data(2000, 500, 16);
  PipelineOptions o;
  o.order.batch_size = 16;
  o.placement.device = dev.get();
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  BatchLease lease;
  ASSERT_TRUE(*(*p)->Next(&lease));
  (*p)->Cancel();
  p->reset();
  lease.Release();
}

}  // namespace
}  // namespace sluice::testing
