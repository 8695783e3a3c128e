// libcublasLt is loaded when a CUDA backend is created, not when the program starts: a CPU run
// does not map it (docs/limits.md). Needs the CUDA toolkit (built with the CUDA backend), not a
// device.
#include "engine/cuda/cublaslt_loader.h"

#include <cublasLt.h>

#include <string>

#include "engine/backend.h"
#include "engine/backend_factory.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(CublasLtLoaderTest, CpuAndAutoBackendsDoNotMapCublasLtAndLoadingMapsIt) {
  // Before anything loads it (the library is not a link dependency).
  ASSERT_FALSE(cuda_internal::CublasLtIsMapped());
  const ModelConfig model{{16, 8, 4}};
  const OptimizerConfig opt;
  BackendSpec options;
  options.options.max_batch = 4;
  options.device.platform = device::Platform::kCpu;
  auto cpu = CreateBackend(options, InitModelState(model, opt, 1), opt);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(cuda_internal::CublasLtIsMapped());
  if (device::CudaDeviceCount() == 0) {
    // "auto" without a device falls back to the CPU without loading cuBLASLt.
    options.device.platform = device::Platform::kAuto;
    auto fallback = CreateBackend(options, InitModelState(model, opt, 1), opt);
    ASSERT_TRUE(fallback.ok()) << fallback.status();
    EXPECT_FALSE(cuda_internal::CublasLtIsMapped());
  }

  ASSERT_TRUE(cuda_internal::LoadCublasLt().ok()) << cuda_internal::LoadCublasLt();
  EXPECT_TRUE(cuda_internal::CublasLtIsMapped());
  // The forwarders reach the library (no device needed for this call).
  EXPECT_EQ(std::string(cublasLtGetStatusName(CUBLAS_STATUS_ALLOC_FAILED)),
            "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_TRUE(cuda_internal::LoadCublasLt().ok());  // idempotent
}

}  // namespace
}  // namespace sluice
