// Helpers for the GPU tests: skipping without a device, device buffers, random data and the
// llm.c-style tolerance check tol = atol + |ref| * rtol.
#ifndef SLUICE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_
#define SLUICE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "gtest/gtest.h"

// Every GPU test starts with this: without a device it skips, saying why (never passes
// silently). Example message: "no CUDA device: cudaGetDeviceCount failed:
// cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime version)".
#define SLUICE_SKIP_WITHOUT_CUDA()                                                    \
  do {                                                                                \
    if (::sluice::device::CudaDeviceCount() == 0) {                                   \
      GTEST_SKIP() << ::sluice::device::CudaDeviceStatus(0).message()                 \
                   << " -- this GPU test needs one (ctest -L gpu on a CUDA machine)"; \
    }                                                                                 \
  } while (0)

namespace sluice::testing_cuda {

// A device copy of a host vector; frees on destruction. Test-only: aborts the test on errors.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr_, 0, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    // Legacy-stream work is not ordered before the tests' non-blocking streams: wait for it.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  explicit DeviceVector(const std::vector<T>& host) : DeviceVector(host.size()) {
    // From pageable memory cudaMemcpy may return before the DMA lands: wait for it.
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceVector() { cudaFree(ptr_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* get() const { return ptr_; }
  std::vector<T> ToHost() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

inline std::vector<float> RandomFloats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}
inline std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& x : v) x = static_cast<uint8_t>(rng() & 0xff);
  return v;
}
inline std::vector<int32_t> RandomLabels(size_t n, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % classes);
  return v;
}

// Counts and reports (first few) elements with |got - ref| > atol + |ref| * rtol.
inline ::testing::AssertionResult AllClose(const std::vector<float>& got,
                                           const std::vector<float>& ref, float atol, float rtol,
                                           const std::string& what = "") {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << ref.size();
  }
  size_t bad = 0;
  std::string first;
  double max_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(double{got[i]} - ref[i]);
    max_err = std::max(max_err, err);
    if (!(err <= atol + std::fabs(ref[i]) * rtol)) {
      if (bad++ < 5) {
        first += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " ref " +
                 std::to_string(ref[i]) + ";";
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << ref.size()
         << " elements out of tolerance (max abs err " << max_err << "):" << first;
}

}  // namespace sluice::testing_cuda

#endif  // SLUICE_TESTS_ENGINE_CUDA_CUDA_TEST_UTIL_H_
