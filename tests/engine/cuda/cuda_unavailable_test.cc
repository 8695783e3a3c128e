// Runs on every machine (label cpu): on one without a CUDA device (or a build without CUDA),
// asking for the CUDA backend fails with kUnavailable and a clear message -- it never crashes.
// On a GPU machine the no-device case cannot be produced, so that test skips, saying so; the
// bad-ordinal case runs everywhere.
#include <string>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

TEST(CudaUnavailableTest, CreateCudaBackendWithoutDeviceIsUnavailable) {
  if (device::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "a CUDA device is present; this test checks the no-device path";
  }
  OptimizerConfig opt;
  auto backend = CreateCudaBackend(InitModelState(ModelConfig{}, opt, 1), opt, BackendOptions{});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
  const std::string msg(backend.status().message());
  EXPECT_TRUE(msg.find("CUDA") != std::string::npos) << msg;
  std::printf("CreateCudaBackend here: %s\n", msg.c_str());
}

TEST(CudaUnavailableTest, DeviceCountIsZeroOrMoreAndStable) {
  const int n = device::CudaDeviceCount();
  EXPECT_GE(n, 0);
  EXPECT_EQ(device::CudaDeviceCount(), n);  // a failed probe leaves no sticky error behind
}

TEST(CudaUnavailableTest, OrdinalOutOfRangeIsUnavailable) {
  OptimizerConfig opt;
  auto backend = CreateCudaBackend(InitModelState(ModelConfig{}, opt, 1), opt, BackendOptions{},
                                   {.ordinal = 1000});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
}

}  // namespace
}  // namespace sluice
