#include "engine/cpu/reference_ops.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

std::vector<float> Random(int n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * (static_cast<float>(rng() >> 40) * 0x1.0p-24f * 2 - 1);
  return v;
}

// Loss of a 2-layer MLP (Linear, ReLU, Linear, softmax CE) through the reference ops, in double
// where it matters for finite differences.
struct TinyMlp {
  int B = 3, I = 5, H = 4, C = 3;
  std::vector<float> x = Random(B * I, 1), w1 = Random(H * I, 2), b1 = Random(H, 3),
                     w2 = Random(C * H, 4), b2 = Random(C, 5);
  std::vector<int32_t> labels = {0, 2, 1};

  double Loss() {
    std::vector<float> h(B * H), logits(B * C), dlogits(B * C);
    ref::LinearForward(x.data(), w1.data(), b1.data(), B, I, H, true, h.data());
    ref::LinearForward(h.data(), w2.data(), b2.data(), B, H, C, false, logits.data());
    double loss = 0;
    int64_t correct = 0;
    ref::SoftmaxCrossEntropy(logits.data(), labels.data(), B, C, dlogits.data(), &loss, &correct);
    return loss / B;
  }
};

TEST(ReferenceOpsTest, BackwardMatchesFiniteDifferencesOfTheLoss) {
  TinyMlp m;
  // Analytic gradients.
  std::vector<float> h(m.B * m.H), logits(m.B * m.C), dlogits(m.B * m.C), dh(m.B * m.H);
  std::vector<float> dw1(m.H * m.I), db1(m.H), dw2(m.C * m.H), db2(m.C);
  ref::LinearForward(m.x.data(), m.w1.data(), m.b1.data(), m.B, m.I, m.H, true, h.data());
  ref::LinearForward(h.data(), m.w2.data(), m.b2.data(), m.B, m.H, m.C, false, logits.data());
  double loss = 0;
  int64_t correct = 0;
  ref::SoftmaxCrossEntropy(logits.data(), m.labels.data(), m.B, m.C, dlogits.data(), &loss,
                           &correct);
  ref::LinearBackward(h.data(), m.w2.data(), dlogits.data(), m.B, m.H, m.C, dw2.data(), db2.data(),
                      dh.data());
  ref::ReluBackwardInPlace(h.data(), dh.size(), dh.data());
  ref::LinearBackward(m.x.data(), m.w1.data(), dh.data(), m.B, m.I, m.H, dw1.data(), db1.data(),
                      nullptr);

  auto check = [&](std::vector<float>& param, const std::vector<float>& grad, const char* what) {
    for (size_t i = 0; i < param.size(); ++i) {
      const float saved = param[i];
      const float eps = 1e-3f;
      param[i] = saved + eps;
      const double up = m.Loss();
      param[i] = saved - eps;
      const double down = m.Loss();
      param[i] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(grad[i], numeric, 2e-3 + 1e-2 * std::abs(numeric)) << what << "[" << i << "]";
    }
  };
  check(m.w1, dw1, "dW1");
  check(m.b1, db1, "db1");
  check(m.w2, dw2, "dW2");
  check(m.b2, db2, "db2");
}

TEST(ReferenceOpsTest, SoftmaxCrossEntropyMatchesHandComputedValues) {
  const float logits[2 * 3] = {1, 2, 3, 0, 0, 0};
  const int32_t labels[2] = {2, 1};
  float d[6];
  double loss = 0;
  int64_t correct = 0;
  ref::SoftmaxCrossEntropy(logits, labels, 2, 3, d, &loss, &correct);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(loss, -std::log(std::exp(3.0) / z) + std::log(3.0), 1e-6);
  EXPECT_EQ(correct, 1);  // row 0 argmax 2 == label; row 1 all equal: first max (0) != 1
  EXPECT_NEAR(d[2], (std::exp(3.0) / z - 1) / 2, 1e-6);
  EXPECT_NEAR(d[4], (1.0 / 3 - 1) / 2, 1e-6);
}

TEST(ReferenceOpsTest, NormalizeU8AppliesMeanAndStd) {
  const uint8_t in[3] = {0, 255, 51};
  float out[3];
  ref::NormalizeU8(in, 3, 0.5f, 0.25f, out);
  EXPECT_FLOAT_EQ(out[0], -2.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
  EXPECT_FLOAT_EQ(out[2], (0.2f - 0.5f) / 0.25f);
}

TEST(ReferenceOpsTest, PlainSgdIsPMinusLrTimesGrad) {
  float p[2] = {1, -2};
  const float g[2] = {0.5f, 1};
  ref::SgdStep(p, g, nullptr, 2, 0.1f, 0, false, 0, true);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.1f);
}

TEST(ReferenceOpsTest, SgdMomentumFirstStepCopiesGradientThenAccumulates) {
  float p = 1, buf = 123;  // garbage buffer: the first step must overwrite it
  const float g = 0.5f;
  ref::SgdStep(&p, &g, &buf, 1, 0.1f, 0.9f, false, 0, true);
  EXPECT_FLOAT_EQ(buf, 0.5f);
  EXPECT_FLOAT_EQ(p, 0.95f);
  ref::SgdStep(&p, &g, &buf, 1, 0.1f, 0.9f, false, 0, false);
  EXPECT_FLOAT_EQ(buf, 0.9f * 0.5f + 0.5f);
  EXPECT_FLOAT_EQ(p, 0.95f - 0.1f * 0.95f);
}

TEST(ReferenceOpsTest, SgdNesterovWithWeightDecayMatchesTorchFormula) {
  float p = 2, buf = 0;
  const float g = 1;
  // g' = 1 + 0.1*2 = 1.2; buf = 1.2; update = 1.2 + 0.9*1.2 = 2.28; p = 2 - 0.5*2.28.
  ref::SgdStep(&p, &g, &buf, 1, 0.5f, 0.9f, true, 0.1f, true);
  EXPECT_FLOAT_EQ(buf, 1.2f);
  EXPECT_FLOAT_EQ(p, 2 - 0.5f * 2.28f);
  // Step 2: g' = 1 + 0.1*0.86 = 1.086; buf = 0.9*1.2 + 1.086 = 2.166; update = g' + 0.9*buf.
  const float p1 = p;
  ref::SgdStep(&p, &g, &buf, 1, 0.5f, 0.9f, true, 0.1f, false);
  const float g2 = 1 + 0.1f * p1;
  const float buf2 = 0.9f * 1.2f + g2;
  EXPECT_FLOAT_EQ(buf, buf2);
  EXPECT_NEAR(p, p1 - 0.5f * (g2 + 0.9f * buf2), 1e-6);
}

TEST(ReferenceOpsTest, AdamWFirstStepsMatchHandComputedValues) {
  float p = 1, m = 0, v = 0;
  const float g = 0.5f;
  const float lr = 0.1f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  ref::AdamWStep(&p, &g, &m, &v, 1, lr, b1, b2, eps, wd, 1);
  // Step 1: p = 1*(1-0.001) - 0.1 * (0.05/0.1) / (sqrt(0.00025/0.001) + eps) = 0.999 - 0.1.
  EXPECT_NEAR(m, 0.05f, 1e-7);
  EXPECT_NEAR(v, 0.00025, 1e-8);
  EXPECT_NEAR(p, 0.899, 1e-6);
  ref::AdamWStep(&p, &g, &m, &v, 1, lr, b1, b2, eps, wd, 2);
  const double m2 = 0.9 * 0.05 + 0.1 * 0.5, v2 = 0.999 * 0.00025 + 0.001 * 0.25;
  const double expected =
      0.899 * (1 - 0.001) - 0.1 * (m2 / (1 - 0.81)) / (std::sqrt(v2 / (1 - 0.998001)) + 1e-8);
  EXPECT_NEAR(p, expected, 1e-6);
}

}  // namespace
}  // namespace sluice
