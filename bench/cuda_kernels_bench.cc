// sluice-cuda-bench: times each kernel and GEMM of the training step for the model's shapes,
// over several launch configurations, and prints what it achieved next to the napkin-math
// limit of an H200 (llm.c's harness style). Also times the whole train step eager vs CUDA
// Graph and projects the 10-epoch MNIST loop (60,000 samples / batch * 10 steps).
//
//   build/engine/cuda/sluice-cuda-bench [--batch 32] [--iters 200]
//
// Limits used: HBM 4.8 TB/s; fp32 (no tensor cores) ~60 TFLOP/s; dense bf16 ~990 TFLOP/s.
// These shapes are tiny (a 32x784 batch is 100 KB), so most kernels are launch-latency bound:
// the "% of limit" column says how far from the roofline each one is, and the step time says
// what launch overhead a CUDA Graph removes. Exits 2 with a message when no device is present.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "device/cuda/cuda_device.h"
#include "engine/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/linear_gemm.h"

namespace sluice {
namespace {

using cuda_internal::DType;
using cuda_internal::StepScalars;

constexpr double kHbmBytesPerSec = 4.8e12;
constexpr double kFp32FlopsPerSec = 60e12;
constexpr double kBf16FlopsPerSec = 990e12;

void Die(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, std::string(s.message()).c_str());
  std::exit(1);
}

// Every CUDA call of the harness: a failure ends it with the call's name and CUDA's error.
void Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "%s failed: %s (%s)\n", what, cudaGetErrorName(err),
               cudaGetErrorString(err));
  std::exit(1);
}

void* DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  Check(cudaMalloc(&p, bytes), "cudaMalloc");
  // The zeros must land before any stream reads them: a memset on the legacy stream is not
  // ordered before the harness's non-blocking stream.
  Check(cudaMemset(p, 0, bytes), "cudaMemset");
  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return p;
}

// Mean microseconds per call of `fn` over `iters` calls on `stream` (after 10 warm-up calls).
double TimeUs(cudaStream_t stream, int iters, const std::function<absl::Status()>& fn) {
  for (int i = 0; i < 10; ++i) Die(fn(), "warm-up");
  cudaEvent_t start, stop;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  Check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) Die(fn(), "timed call");
  Check(cudaEventRecord(stop, stream), "cudaEventRecord");
  Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  Check(cudaEventDestroy(start), "cudaEventDestroy");
  Check(cudaEventDestroy(stop), "cudaEventDestroy");
  return 1000.0 * ms / iters;
}

void ReportBandwidth(const char* name, const std::string& config, double us, double bytes) {
  const double bps = bytes / (us * 1e-6);
  std::printf("%-28s %-22s %9.2f us %9.1f GB/s   %5.1f%% of HBM %.1f TB/s\n", name, config.c_str(),
              us, bps / 1e9, 100.0 * bps / kHbmBytesPerSec, kHbmBytesPerSec / 1e12);
}
void ReportFlops(const char* name, const std::string& config, double us, double flops,
                 double limit) {
  const double fps = flops / (us * 1e-6);
  std::printf("%-28s %-22s %9.2f us %9.3f TFLOP/s %5.2f%% of %.0f TFLOP/s\n", name, config.c_str(),
              us, fps / 1e12, 100.0 * fps / limit, limit / 1e12);
}

int Run(int B, int iters) {
  const absl::Status device = device::CudaDeviceStatus(0);
  if (!device.ok()) {
    std::fprintf(stderr, "sluice-cuda-bench: %s\n", std::string(device.message()).c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s (sm_%d%d, %d SMs), batch %d, %d iterations per figure\n", prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, B, iters);
  cudaStream_t s;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  const ModelConfig model;  // 784,128,10
  const int I = model.layers[0], H = model.layers[1], C = model.layers[2];
  const int64_t P = model.num_parameters();

  auto* u8 = static_cast<uint8_t*>(DeviceAlloc(size_t(B) * I));
  auto* x = static_cast<float*>(DeviceAlloc(size_t(B) * I * 4));
  auto* xh = DeviceAlloc(size_t(B) * I * 2);
  auto* h = static_cast<float*>(DeviceAlloc(size_t(B) * H * 4));
  auto* dh = static_cast<float*>(DeviceAlloc(size_t(B) * H * 4));
  auto* logits = static_cast<float*>(DeviceAlloc(size_t(B) * C * 4));
  auto* dlogits = static_cast<float*>(DeviceAlloc(size_t(B) * C * 4));
  auto* labels = static_cast<int32_t*>(DeviceAlloc(size_t(B) * 4));
  auto* params = static_cast<float*>(DeviceAlloc(P * 4));
  auto* grads = static_cast<float*>(DeviceAlloc(P * 4));
  auto* m = static_cast<float*>(DeviceAlloc(P * 4));
  auto* v = static_cast<float*>(DeviceAlloc(P * 4));
  auto* w1h = DeviceAlloc(size_t(H) * I * 2);
  auto* scalars = static_cast<StepScalars*>(DeviceAlloc(sizeof(StepScalars)));
  StepScalars init{};
  init.loss_scale = 1.0f;
  init.lr = 0.01f;
  // On the stream the kernels run on, then waited for: a legacy-stream cudaMemcpy from pageable
  // memory may return before its DMA lands and is not ordered before a non-blocking stream.
  Check(cudaMemcpyAsync(scalars, &init, sizeof(init), cudaMemcpyHostToDevice, s),
        "cudaMemcpyAsync");
  Check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  const size_t ws_bytes = 32u << 20;
  void* ws = DeviceAlloc(ws_bytes);

  std::printf("\n-- element-wise kernels (bandwidth) --\n");
  const int64_t nx = int64_t{B} * I;
  for (int block : {128, 256, 512, 1024}) {
    const std::string cfg = "block " + std::to_string(block);
    ReportBandwidth("ConvertInput u8->f32", cfg,
                    TimeUs(s, iters,
                           [&] {
                             return cuda_internal::LaunchConvertInput(u8, H2DFormat::kU8, nx, {}, x,
                                                                      DType::kF32, s, block);
                           }),
                    nx * 5.0);
    ReportBandwidth(
        "ReluBackward (hidden)", cfg,
        TimeUs(s, iters,
               [&] { return cuda_internal::LaunchReluBackward(h, int64_t{B} * H, dh, s, block); }),
        int64_t{B} * H * 12.0);
    ReportBandwidth(
        "BiasRelu (fallback)", cfg,
        TimeUs(s, iters,
               [&] { return cuda_internal::LaunchBiasRelu(h, params, B, H, true, s, block); }),
        int64_t{B} * H * 8.0);
    OptimizerConfig sgd;
    cuda_internal::OptimizerStepArgs a{params,      grads, nullptr, nullptr, nullptr,
                                       DType::kF32, P,     sgd,     scalars};
    ReportBandwidth(
        "OptimizerStep SGD", cfg,
        TimeUs(s, iters, [&] { return cuda_internal::LaunchOptimizerStep(a, s, block); }),
        P * 12.0);
    OptimizerConfig adam;
    adam.kind = OptimizerKind::kAdamW;
    cuda_internal::OptimizerStepArgs b{params, grads, m, v, nullptr, DType::kF32, P, adam, scalars};
    ReportBandwidth(
        "OptimizerStep AdamW", cfg,
        TimeUs(s, iters, [&] { return cuda_internal::LaunchOptimizerStep(b, s, block); }),
        P * 28.0);
  }
  ReportBandwidth("SoftmaxCrossEntropy", "warp per row",
                  TimeUs(s, iters,
                         [&] {
                           return cuda_internal::LaunchSoftmaxCrossEntropy(
                               logits, labels, B, C, nullptr, dlogits, &scalars->train_loss_sum,
                               &scalars->train_correct, &scalars->bad_label, s);
                         }),
                  int64_t{B} * C * 8.0 + B * 4.0);
  ReportBandwidth(
      "BiasGrad (hidden)", "32x8 block",
      TimeUs(s, iters, [&] { return cuda_internal::LaunchBiasGrad(dh, B, H, grads, s); }),
      int64_t{B} * H * 4.0 + H * 4.0);

  std::printf("\n-- GEMMs via cuBLASLt (FLOP rate) --\n");
  for (DType t : {DType::kF32, DType::kBF16}) {
    auto gemm = cuda_internal::LinearGemm::Create(t, ws, ws_bytes);
    Die(gemm.status(), "LinearGemm::Create");
    const bool f32 = t == DType::kF32;
    const double limit = f32 ? kFp32FlopsPerSec : kBf16FlopsPerSec;
    const void* xin = f32 ? static_cast<const void*>(x) : xh;
    const void* w1 = f32 ? static_cast<const void*>(params) : w1h;
    const std::string cfg = std::string(f32 ? "fp32" : "bf16") + " " + std::to_string(B) + "x" +
                            std::to_string(I) + "x" + std::to_string(H);
    const double flops = 2.0 * B * I * H;
    ReportFlops("Linear1 forward+ReLU+bias", cfg,
                TimeUs(s, iters,
                       [&] {
                         return (*gemm)->Forward(xin, w1, params + int64_t{H} * I, B, I, H, true, h,
                                                 s);
                       }),
                flops, limit);
    ReportFlops("Linear1 dW", cfg,
                TimeUs(s, iters,
                       [&] {
                         return (*gemm)->BackwardWeights(
                             xin, f32 ? static_cast<const void*>(dh) : xh, B, I, H, grads, s);
                       }),
                flops, limit);
    std::printf("  (epilogue fallbacks for %s: %d)\n", f32 ? "fp32" : "bf16",
                (*gemm)->epilogue_fallbacks());
  }

  std::printf("\n-- whole train step through CudaBackend (host u8 batch) --\n");
  std::vector<uint8_t> host_u8(size_t(B) * I, 17);
  std::vector<int32_t> host_labels(B, 3);
  BatchView batch;
  batch.samples = host_u8.data();
  batch.labels = host_labels.data();
  batch.sample.dtype = H2DFormat::kU8;
  batch.size = B;
  batch.sample = FlatSampleSpec(batch.sample.dtype, I);
  for (bool graph : {false, true}) {
    OptimizerConfig opt;
    BackendOptions options;
    options.max_batch = B;
    auto backend =
        CreateCudaBackend(InitModelState(model, opt, 1), opt, options, {.cuda_graph = graph});
    Die(backend.status(), "CreateCudaBackend");
    cudaStream_t bs = device::NativeCudaStream((*backend)->compute_stream());
    const double us = TimeUs(bs, iters, [&] { return (*backend)->TrainStep(batch, 0.01f); });
    const double steps = 10.0 * ((60000 + B - 1) / B);
    std::printf("%-28s %-22s %9.2f us/step  %10.0f samples/s  10 epochs: %.2f s (target < 1.5 s)\n",
                "TrainStep", graph ? "CUDA Graph" : "eager", us, B / (us * 1e-6),
                steps * us * 1e-6);
  }
  std::printf(
      "\nNote: a host batch costs a pageable H2D copy per step; the pipeline's pinned\n"
      "device batches avoid it.\n");
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  int batch = 32, iters = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0) iters = std::atoi(argv[i + 1]);
  }
  if (batch < 1 || iters < 1) {
    std::fprintf(stderr, "usage: sluice-cuda-bench [--batch N>=1] [--iters N>=1]\n");
    return 1;
  }
  return sluice::Run(batch, iters);
}
