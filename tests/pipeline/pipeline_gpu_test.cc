// CUDA upload tests (ctest label gpu). They skip, saying why, without CUDA or a device.
#include <vector>

#include "gtest/gtest.h"
#include "pipeline/internal/device_uploader.h"
#include "tests/pipeline/test_util.h"
#if SLUICE_PIPELINE_CUDA
#include <cuda_runtime.h>
#endif

namespace sluice::testing {
namespace {

#define SKIP_WITHOUT_DEVICE()                                                             \
  do {                                                                                    \
    if (!pipeline_internal::CudaDeviceAvailable()) {                                      \
      GTEST_SKIP() << (SLUICE_PIPELINE_CUDA_BUILD ? "no CUDA device is present"           \
                                                  : "sluice was built without CUDA");     \
    }                                                                                     \
  } while (0)

#if SLUICE_PIPELINE_CUDA
constexpr bool SLUICE_PIPELINE_CUDA_BUILD = true;
#else
constexpr bool SLUICE_PIPELINE_CUDA_BUILD = false;
#endif

TEST(PipelineGpu, DeviceBatchesMatchHostBatches) {
  SKIP_WITHOUT_DEVICE();
#if SLUICE_PIPELINE_CUDA
  TestDataset data(300, 128, 16);
  PipelineOptions o;
  o.batch_size = 7;
  o.threads = 2;
  o.device_ring_depth = 2;
  o.device_upload = false;
  auto host = RunAll(data.dataset.get(), o);
  ASSERT_TRUE(host.ok()) << host.status();
  o.device_upload = true;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->uploads_to_device());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::vector<Batch> got;
  BatchLease lease;
  while (*(*p)->Next(&lease)) {
    const BatchView& v = lease.view();
    ASSERT_TRUE(v.on_device);
    ASSERT_NE(v.ready_event, nullptr);
    ASSERT_EQ(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(v.ready_event), 0), cudaSuccess);
    std::vector<float> samples(size_t{v.size} * v.features);
    std::vector<int32_t> labels(v.size);
    ASSERT_EQ(cudaMemcpyAsync(samples.data(), v.samples, samples.size() * 4, cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(labels.data(), v.labels, labels.size() * 4, cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    BatchView hv = v;
    hv.samples = samples.data();
    hv.labels = labels.data();
    got.push_back(ToBatch(hv));
    lease.Release(stream);
  }
  EXPECT_EQ(got, *host);
  const PipelineStats s = (*p)->Stats();
  EXPECT_EQ(s[Stage::kH2D].items, got.size());
  EXPECT_GT(s[Stage::kH2D].bytes, 0u);
  EXPECT_LE(s[Stage::kH2D].queue_high_water, 2u);
  cudaStreamDestroy(stream);
#endif
}

TEST(PipelineGpu, CancelWithCopiesInFlight) {
  SKIP_WITHOUT_DEVICE();
  TestDataset data(2000, 500, 16);
  PipelineOptions o;
  o.batch_size = 16;
  auto p = Pipeline::Create(data.dataset.get(), o);
  ASSERT_TRUE(p.ok());
  BatchLease lease;
  ASSERT_TRUE(*(*p)->Next(&lease));
  (*p)->Cancel();
  p->reset();
  lease.Release();
}

}  // namespace
}  // namespace sluice::testing
