// Device upload tests (ctest label gpu), written against the device layer only. They skip,
// saying why, without CUDA or a device.
#include <memory>
#include <vector>

#include "device/device.h"
#include "gtest/gtest.h"
#include "tests/pipeline/test_util.h"

namespace sluice::testing {
namespace {

// Opens CUDA device 0 or skips the test, saying why.
#define OPEN_DEVICE_OR_SKIP(dev)                                  \
  std::unique_ptr<device::Device> dev;                            \
  do {                                                            \
    auto opened = device::OpenCudaDevice(0);                      \
    if (!opened.ok()) GTEST_SKIP() << opened.status().message();  \
    dev = *std::move(opened);                                     \
  } while (0)

TEST(PipelineGpu, DeviceBatchesMatchHostBatches) {
  OPEN_DEVICE_OR_SKIP(dev);
  TestDataset data(300, 128, 16);
  PipelineOptions o;
  o.order.batch_size = 7;
  o.resources.threads = 2;
  o.resources.device_ring_depth = 2;
  auto host = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(host.ok()) << host.status();
  o.placement.device = dev.get();
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->uploads_to_device());
  auto stream = dev->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<Batch> got;
  BatchLease lease;
  while (*(*p)->Next(&lease)) {
    const BatchView& v = lease.view();
    ASSERT_TRUE(v.on_device);
    ASSERT_NE(v.ready_event, nullptr);
    ASSERT_TRUE((*stream)->Wait(v.ready_event).ok());
    std::vector<float> samples(size_t{v.size} * v.features);
    std::vector<int32_t> labels(v.size);
    ASSERT_TRUE((*stream)->CopyToHost(samples.data(), v.samples, samples.size() * 4).ok());
    ASSERT_TRUE((*stream)->CopyToHost(labels.data(), v.labels, labels.size() * 4).ok());
    ASSERT_TRUE((*stream)->Synchronize().ok());
    BatchView hv = v;
    hv.samples = samples.data();
    hv.labels = labels.data();
    got.push_back(ToBatch(hv));
    lease.Release(stream->get());
  }
  EXPECT_EQ(got, *host);
  const PipelineStats s = (*p)->Stats();
  EXPECT_EQ(s[Stage::kH2D].items, got.size());
  EXPECT_GT(s[Stage::kH2D].bytes, 0u);
  EXPECT_LE(s[Stage::kH2D].queue_high_water, 2u);
}

TEST(PipelineGpu, CancelWithCopiesInFlight) {
  OPEN_DEVICE_OR_SKIP(dev);
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
