// Each CUDA kernel (and the cuBLASLt Linear products) against its CPU reference in
// engine/cpu/reference_ops.h, on random data: tol = atol + |ref| * rtol. Label gpu: skips,
// saying why, without a device.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "engine/cpu/reference_ops.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/linear_gemm.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace sluice {
namespace {

using cuda_internal::DType;
using cuda_internal::StepScalars;
using testing_cuda::AllClose;
using testing_cuda::DeviceVector;
using testing_cuda::RandomBytes;
using testing_cuda::RandomFloats;
using testing_cuda::RandomLabels;

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_SKIP_WITHOUT_CUDA();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaKernelsTest, NormalizeU8MatchesReferenceExactly) {
  const int64_t n = 32 * 784 + 17;  // not a multiple of the block
  auto in = RandomBytes(n, 1);
  std::vector<float> ref(n);
  cuda_internal::ChannelAffine norm;
  norm.mean[0] = 0.2860f;
  norm.std[0] = 0.3530f;
  ref::NormalizeU8(in.data(), n, norm.mean[0], norm.std[0], ref.data());
  for (int block : {64, 128, 256, 512, 1024}) {
    DeviceVector<uint8_t> d_in(in);
    DeviceVector<float> d_out(n);
    ASSERT_TRUE(cuda_internal::LaunchConvertInput(d_in.get(), H2DFormat::kU8, n, norm, d_out.get(),
                                                  DType::kF32, stream_, block)
                    .ok());
    EXPECT_TRUE(AllClose(d_out.ToHost(), ref, 0.0f, 0.0f, "normalize u8"));
  }
}

// [B, 3, 5, 7] u8: each channel plane normalized with its own mean and std, exactly as the CPU
// reference run per plane (channel = (i / (H*W)) % C).
TEST_F(CudaKernelsTest, PerChannelNormalizeU8MatchesReferencePerPlaneExactly) {
  const int64_t plane = 5 * 7, channels = 3, n = 9 * channels * plane;
  auto in = RandomBytes(n, 3);
  cuda_internal::ChannelAffine norm;
  norm.plane = plane;
  norm.channels = channels;
  const float means[] = {0.4914f, 0.4822f, 0.4465f}, stds[] = {0.2470f, 0.2435f, 0.2616f};
  for (int c = 0; c < channels; ++c) {
    norm.mean[c] = means[c];
    norm.std[c] = stds[c];
  }
  std::vector<float> ref(n);
  for (int64_t p = 0; p < n; p += plane) {
    const int64_t c = (p / plane) % channels;
    ref::NormalizeU8(in.data() + p, plane, means[c], stds[c], ref.data() + p);
  }
  for (int block : {64, 256, 1024}) {
    DeviceVector<uint8_t> d_in(in);
    DeviceVector<float> d_out(n);
    ASSERT_TRUE(cuda_internal::LaunchConvertInput(d_in.get(), H2DFormat::kU8, n, norm, d_out.get(),
                                                  DType::kF32, stream_, block)
                    .ok());
    EXPECT_TRUE(AllClose(d_out.ToHost(), ref, 0.0f, 0.0f, "per-channel normalize u8"));
  }
}

TEST_F(CudaKernelsTest, NormalizeU8ToBf16IsWithinBf16Rounding) {
  const int64_t n = 4096;
  auto in = RandomBytes(n, 2);
  std::vector<float> ref(n);
  ref::NormalizeU8(in.data(), n, 0.0f, 1.0f, ref.data());
  DeviceVector<uint8_t> d_in(in);
  DeviceVector<uint16_t> d_bf16(n);
  DeviceVector<float> d_back(n);
  ASSERT_TRUE(cuda_internal::LaunchConvertInput(d_in.get(), H2DFormat::kU8, n,
                                                cuda_internal::ChannelAffine{}, d_bf16.get(),
                                                DType::kBF16, stream_)
                  .ok());
  // bf16 -> f32 is exact: shift the 16 bits up.
  auto bits = d_bf16.ToHost();
  std::vector<float> got(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t w = uint32_t{bits[i]} << 16;
    std::memcpy(&got[i], &w, 4);
  }
  EXPECT_TRUE(AllClose(got, ref, 1e-6f, 1.0f / 256, "normalize u8 -> bf16"));
}

TEST_F(CudaKernelsTest, BiasReluMatchesLinearForwardWithIdentityWeights) {
  // y + b then ReLU equals ref::LinearForward(y, I, b) exactly: x W^T with W = identity.
  const int B = 37, O = 130;
  auto y = RandomFloats(static_cast<size_t>(B) * O, -1, 1, 3);
  auto b = RandomFloats(O, -0.5f, 0.5f, 4);
  std::vector<float> eye(static_cast<size_t>(O) * O, 0.0f);
  for (int i = 0; i < O; ++i) eye[static_cast<size_t>(i) * O + i] = 1.0f;
  for (bool relu : {false, true}) {
    std::vector<float> ref(y.size());
    ref::LinearForward(y.data(), eye.data(), b.data(), B, O, O, relu, ref.data());
    DeviceVector<float> d_y(y), d_b(b);
    ASSERT_TRUE(cuda_internal::LaunchBiasRelu(d_y.get(), d_b.get(), B, O, relu, stream_).ok());
    EXPECT_TRUE(AllClose(d_y.ToHost(), ref, 0.0f, 0.0f, relu ? "bias+relu" : "bias"));
  }
}

TEST_F(CudaKernelsTest, ReluBackwardMatchesReference) {
  const int64_t n = 32 * 128 + 5;
  auto y = RandomFloats(n, -1, 1, 5);
  for (int64_t i = 0; i < n; i += 7) y[i] = 0.0f;  // exactly zero: gradient must be zero
  auto dx = RandomFloats(n, -1, 1, 6);
  auto ref = dx;
  ref::ReluBackwardInPlace(y.data(), n, ref.data());
  DeviceVector<float> d_y(y), d_dx(dx);
  ASSERT_TRUE(cuda_internal::LaunchReluBackward(d_y.get(), n, d_dx.get(), stream_).ok());
  EXPECT_TRUE(AllClose(d_dx.ToHost(), ref, 0.0f, 0.0f, "relu backward"));
}

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyMatchesReference) {
  for (int C : {10, 3, 47}) {  // one lane per class, fewer, and more than a warp
    const int B = 37;
    auto logits = RandomFloats(static_cast<size_t>(B) * C, -4, 4, 7 + C);
    logits[3 * C + 1] = logits[3 * C + 2] = 9.0f;  // a tie: the first max wins
    auto labels = RandomLabels(B, C, 8);
    labels[3] = 2;
    std::vector<float> ref_d(logits.size());
    double ref_loss = 0;
    int64_t ref_correct = 0;
    ref::SoftmaxCrossEntropy(logits.data(), labels.data(), B, C, ref_d.data(), &ref_loss,
                             &ref_correct);
    DeviceVector<float> d_logits(logits), d_d(logits.size());
    DeviceVector<int32_t> d_labels(labels);
    DeviceVector<double> d_loss(1);
    DeviceVector<unsigned long long> d_correct(1);
    DeviceVector<int> d_bad(1);
    ASSERT_TRUE(cuda_internal::LaunchSoftmaxCrossEntropy(d_logits.get(), d_labels.get(), B, C,
                                                         nullptr, d_d.get(), d_loss.get(),
                                                         d_correct.get(), d_bad.get(), stream_)
                    .ok());
    EXPECT_TRUE(AllClose(d_d.ToHost(), ref_d, 1e-7f, 1e-5f, "dlogits"));
    EXPECT_NEAR(d_loss.ToHost()[0], ref_loss, 1e-5 * std::fabs(ref_loss) + 1e-5);
    EXPECT_EQ(static_cast<int64_t>(d_correct.ToHost()[0]), ref_correct) << "C=" << C;
    EXPECT_EQ(d_bad.ToHost()[0], 0);
  }
}

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyFlagsLabelOutOfRange) {
  const int B = 4, C = 10;
  auto logits = RandomFloats(B * C, -1, 1, 9);
  std::vector<int32_t> labels = {1, 10, -1, 3};
  DeviceVector<float> d_logits(logits), d_d(logits.size());
  DeviceVector<int32_t> d_labels(labels);
  DeviceVector<double> d_loss(1);
  DeviceVector<unsigned long long> d_correct(1);
  DeviceVector<int> d_bad(1);
  ASSERT_TRUE(cuda_internal::LaunchSoftmaxCrossEntropy(d_logits.get(), d_labels.get(), B, C,
                                                       nullptr, d_d.get(), d_loss.get(),
                                                       d_correct.get(), d_bad.get(), stream_)
                  .ok());
  EXPECT_EQ(d_bad.ToHost()[0], 1);
}

TEST_F(CudaKernelsTest, BiasGradMatchesLinearBackward) {
  for (int B : {1, 32, 257}) {
    const int I = 3, O = 130;
    auto x = RandomFloats(static_cast<size_t>(B) * I, -1, 1, 10);
    auto w = RandomFloats(static_cast<size_t>(O) * I, -1, 1, 11);
    auto dy = RandomFloats(static_cast<size_t>(B) * O, -1, 1, 12);
    std::vector<float> dw(static_cast<size_t>(O) * I), db(O);
    ref::LinearBackward(x.data(), w.data(), dy.data(), B, I, O, dw.data(), db.data(), nullptr);
    DeviceVector<float> d_dy(dy), d_db(O);
    ASSERT_TRUE(cuda_internal::LaunchBiasGrad(d_dy.get(), B, O, d_db.get(), stream_).ok());
    EXPECT_TRUE(AllClose(d_db.ToHost(), db, 1e-5f, 1e-5f, "bias grad"));
  }
}

TEST_F(CudaKernelsTest, CheckFiniteFindsNanAndInf) {
  const int64_t n = 100000;
  auto x = RandomFloats(n, -1, 1, 13);
  DeviceVector<float> d_x(x);
  DeviceVector<int> d_flag(1);
  ASSERT_TRUE(cuda_internal::LaunchCheckFinite(d_x.get(), n, d_flag.get(), stream_).ok());
  EXPECT_EQ(d_flag.ToHost()[0], 0);
  x[n - 1] = std::numeric_limits<float>::infinity();
  DeviceVector<float> d_y(x);
  ASSERT_TRUE(cuda_internal::LaunchCheckFinite(d_y.get(), n, d_flag.get(), stream_).ok());
  EXPECT_EQ(d_flag.ToHost()[0], 1);
}

// Runs `steps` fused optimizer updates on the device and the reference on the host.
void CheckOptimizer(cudaStream_t stream, const OptimizerConfig& cfg, int steps) {
  const int64_t n = 101770;  // 784*128+128+128*10+10: the reference model's parameter count
  auto p = RandomFloats(n, -0.1f, 0.1f, 14);
  std::vector<float> s0(n, 0.0f), s1(n, 0.0f);
  DeviceVector<float> d_p(p), d_g(n), d_s0(s0), d_s1(s1);
  DeviceVector<StepScalars> d_sc(1);
  StepScalars sc{};
  sc.loss_scale = 1.0f;
  ASSERT_EQ(cudaMemcpy(d_sc.get(), &sc, sizeof(sc), cudaMemcpyHostToDevice), cudaSuccess);
  for (int step = 0; step < steps; ++step) {
    auto g = RandomFloats(n, -1, 1, 100 + step);
    ASSERT_EQ(cudaMemcpy(d_g.get(), g.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    const float lr = cfg.lr * (1.0f + 0.1f * step);
    ASSERT_TRUE(cuda_internal::LaunchSetLr(d_sc.get(), lr, stream).ok());
    cuda_internal::OptimizerStepArgs args;
    args.params = d_p.get();
    args.grads = d_g.get();
    args.slot0 = d_s0.get();
    args.slot1 = d_s1.get();
    args.n = n;
    args.config = cfg;
    args.scalars = d_sc.get();
    ASSERT_TRUE(cuda_internal::LaunchOptimizerStep(args, stream).ok());
    ASSERT_TRUE(cuda_internal::LaunchFinishStep(d_sc.get(), false, stream).ok());
    if (cfg.kind == OptimizerKind::kSgd) {
      ref::SgdStep(p.data(), g.data(), s0.data(), n, lr, cfg.momentum, cfg.nesterov,
                   cfg.weight_decay, step == 0);
    } else {
      ref::AdamWStep(p.data(), g.data(), s0.data(), s1.data(), n, lr, cfg.beta1, cfg.beta2, cfg.eps,
                     cfg.weight_decay, step + 1);
    }
  }
  EXPECT_TRUE(AllClose(d_p.ToHost(), p, 1e-6f, 1e-5f, "params"));
  EXPECT_TRUE(AllClose(d_s0.ToHost(), s0, 1e-6f, 1e-5f, "slot 0"));
  if (cfg.kind == OptimizerKind::kAdamW) {
    EXPECT_TRUE(AllClose(d_s1.ToHost(), s1, 1e-7f, 1e-5f, "slot 1"));
  }
  EXPECT_EQ(d_sc.ToHost()[0].optimizer_steps, steps);
}

TEST_F(CudaKernelsTest, SgdStepMatchesReference) {
  OptimizerConfig cfg;
  cfg.lr = 0.01f;
  CheckOptimizer(stream_, cfg, 3);
}
TEST_F(CudaKernelsTest, SgdMomentumWeightDecayMatchesReference) {
  OptimizerConfig cfg;
  cfg.lr = 0.01f;
  cfg.momentum = 0.9f;
  cfg.weight_decay = 5e-4f;
  CheckOptimizer(stream_, cfg, 5);
}
TEST_F(CudaKernelsTest, SgdNesterovMatchesReference) {
  OptimizerConfig cfg;
  cfg.lr = 0.01f;
  cfg.momentum = 0.9f;
  cfg.nesterov = true;
  CheckOptimizer(stream_, cfg, 5);
}
TEST_F(CudaKernelsTest, AdamWStepMatchesReference) {
  OptimizerConfig cfg;
  cfg.kind = OptimizerKind::kAdamW;
  cfg.lr = 1e-3f;
  cfg.weight_decay = 0.01f;
  CheckOptimizer(stream_, cfg, 5);
}

TEST_F(CudaKernelsTest, OptimizerSkipsStepWhenGradientsOverflowed) {
  const int64_t n = 1000;
  auto p = RandomFloats(n, -1, 1, 15);
  DeviceVector<float> d_p(p), d_g(n);
  DeviceVector<StepScalars> d_sc(1);
  StepScalars sc{};
  sc.loss_scale = 1024.0f;
  sc.found_inf = 1;
  ASSERT_EQ(cudaMemcpy(d_sc.get(), &sc, sizeof(sc), cudaMemcpyHostToDevice), cudaSuccess);
  cuda_internal::OptimizerStepArgs args;
  args.params = d_p.get();
  args.grads = d_g.get();
  args.n = n;
  args.scalars = d_sc.get();
  ASSERT_TRUE(cuda_internal::LaunchOptimizerStep(args, stream_).ok());
  ASSERT_TRUE(cuda_internal::LaunchFinishStep(d_sc.get(), true, stream_).ok());
  EXPECT_EQ(d_p.ToHost(), p);
  StepScalars after = d_sc.ToHost()[0];
  EXPECT_EQ(after.loss_scale, 512.0f);
  EXPECT_EQ(after.skipped_steps, 1);
  EXPECT_EQ(after.optimizer_steps, 0);
  EXPECT_EQ(after.found_inf, 0);
}

// The three Linear products through cuBLASLt (layout transposes, bias/ReLU epilogue) against
// ref::LinearForward / ref::LinearBackward, with the model's shapes and odd ones.
struct GemmShape {
  int B, I, O;
};
void PrintTo(const GemmShape& s, std::ostream* os) {
  *os << "B" << s.B << "_I" << s.I << "_O" << s.O;
}
class CudaLinearGemmTest : public CudaKernelsTest,
                           public ::testing::WithParamInterface<GemmShape> {};

TEST_P(CudaLinearGemmTest, ForwardAndBackwardMatchReference) {
  const auto [B, I, O] = GetParam();
  auto x = RandomFloats(static_cast<size_t>(B) * I, -1, 1, 20);
  auto w = RandomFloats(static_cast<size_t>(O) * I, -0.1f, 0.1f, 21);
  auto b = RandomFloats(O, -0.1f, 0.1f, 22);
  auto dy = RandomFloats(static_cast<size_t>(B) * O, -1, 1, 23);
  DeviceVector<float> d_x(x), d_w(w), d_b(b), d_dy(dy), d_y(static_cast<size_t>(B) * O),
      d_dw(static_cast<size_t>(O) * I), d_dx(static_cast<size_t>(B) * I);
  DeviceVector<char> ws(4 << 20);
  auto gemm = cuda_internal::LinearGemm::Create(DType::kF32, ws.get(), 4 << 20);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  for (bool relu : {false, true}) {
    std::vector<float> ref_y(static_cast<size_t>(B) * O);
    ref::LinearForward(x.data(), w.data(), b.data(), B, I, O, relu, ref_y.data());
    ASSERT_TRUE(
        (*gemm)->Forward(d_x.get(), d_w.get(), d_b.get(), B, I, O, relu, d_y.get(), stream_).ok());
    EXPECT_TRUE(AllClose(d_y.ToHost(), ref_y, 1e-5f, 1e-4f, relu ? "forward relu" : "forward"));
  }
  std::vector<float> ref_dw(static_cast<size_t>(O) * I), ref_db(O),
      ref_dx(static_cast<size_t>(B) * I);
  ref::LinearBackward(x.data(), w.data(), dy.data(), B, I, O, ref_dw.data(), ref_db.data(),
                      ref_dx.data());
  ASSERT_TRUE((*gemm)->BackwardWeights(d_x.get(), d_dy.get(), B, I, O, d_dw.get(), stream_).ok());
  ASSERT_TRUE((*gemm)->BackwardInput(d_dy.get(), d_w.get(), B, I, O, d_dx.get(), stream_).ok());
  EXPECT_TRUE(AllClose(d_dw.ToHost(), ref_dw, 1e-5f, 1e-4f, "dW"));
  EXPECT_TRUE(AllClose(d_dx.ToHost(), ref_dx, 1e-5f, 1e-4f, "dx"));
  // The unaligned second-layer weight of the flat parameter buffer must work too.
  DeviceVector<float> d_w_off(w.size() + 1);
  ASSERT_EQ(cudaMemcpy(d_w_off.get() + 1, w.data(), w.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_TRUE(
      (*gemm)
          ->Forward(d_x.get(), d_w_off.get() + 1, d_b.get(), B, I, O, false, d_y.get(), stream_)
          .ok());
  std::vector<float> ref_y(static_cast<size_t>(B) * O);
  ref::LinearForward(x.data(), w.data(), b.data(), B, I, O, false, ref_y.data());
  EXPECT_TRUE(AllClose(d_y.ToHost(), ref_y, 1e-5f, 1e-4f, "forward, unaligned W"));
  std::printf("B=%d I=%d O=%d: %d epilogue fallbacks\n", B, I, O, (*gemm)->epilogue_fallbacks());
}

INSTANTIATE_TEST_SUITE_P(ModelShapes, CudaLinearGemmTest,
                         ::testing::Values(GemmShape{32, 784, 128}, GemmShape{32, 128, 10},
                                           GemmShape{7, 784, 128}, GemmShape{1, 5, 3},
                                           GemmShape{1024, 784, 128}),
                         [](const auto& param_info) {
                           const GemmShape& s = param_info.param;
                           return "B" + std::to_string(s.B) + "_I" + std::to_string(s.I) + "_O" +
                                  std::to_string(s.O);
                         });

TEST_F(CudaKernelsTest, Bf16ForwardIsWithinBf16Tolerance) {
  const int B = 32, I = 784, O = 128;
  auto x = RandomFloats(static_cast<size_t>(B) * I, -1, 1, 30);
  auto w = RandomFloats(static_cast<size_t>(O) * I, -0.05f, 0.05f, 31);
  auto b = RandomFloats(O, -0.1f, 0.1f, 32);
  std::vector<float> ref_y(static_cast<size_t>(B) * O);
  ref::LinearForward(x.data(), w.data(), b.data(), B, I, O, true, ref_y.data());
  DeviceVector<float> d_x(x), d_w(w), d_b(b), d_y(static_cast<size_t>(B) * O);
  DeviceVector<uint16_t> d_xh(x.size()), d_wh(w.size());
  ASSERT_TRUE(
      cuda_internal::LaunchCast(d_x.get(), x.size(), d_xh.get(), DType::kBF16, stream_).ok());
  ASSERT_TRUE(
      cuda_internal::LaunchCast(d_w.get(), w.size(), d_wh.get(), DType::kBF16, stream_).ok());
  DeviceVector<char> ws(4 << 20);
  auto gemm = cuda_internal::LinearGemm::Create(DType::kBF16, ws.get(), 4 << 20);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  ASSERT_TRUE(
      (*gemm)->Forward(d_xh.get(), d_wh.get(), d_b.get(), B, I, O, true, d_y.get(), stream_).ok());
  // bf16 keeps 8 mantissa bits; sums of 784 products of ~0.05: absolute error ~1e-2.
  EXPECT_TRUE(AllClose(d_y.ToHost(), ref_y, 3e-2f, 2e-2f, "bf16 forward"));
}

}  // namespace
}  // namespace sluice
