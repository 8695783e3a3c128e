// Plain loops, double accumulators: these are the ground truth the fast paths are tested
// against, so clarity and accuracy beat speed here.
#include "engine/cpu/reference_ops.h"

#include <cmath>

namespace sluice::ref {

void NormalizeU8(const uint8_t* in, int64_t n, float mean, float std, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = (static_cast<float>(in[i]) / 255.0f - mean) / std;
  }
}

void LinearForward(const float* x, const float* w, const float* b, int B, int I, int O, bool relu,
                   float* y) {
  for (int r = 0; r < B; ++r) {
    for (int o = 0; o < O; ++o) {
      double acc = b[o];
      for (int i = 0; i < I; ++i) {
        acc += static_cast<double>(x[int64_t{r} * I + i]) * w[int64_t{o} * I + i];
      }
      float v = static_cast<float>(acc);
      if (relu && v < 0.0f) v = 0.0f;
      y[int64_t{r} * O + o] = v;
    }
  }
}

void LinearBackward(const float* x, const float* w, const float* dy, int B, int I, int O, float* dw,
                    float* db, float* dx) {
  for (int o = 0; o < O; ++o) {
    for (int i = 0; i < I; ++i) {
      double acc = 0;
      for (int r = 0; r < B; ++r) {
        acc += static_cast<double>(dy[int64_t{r} * O + o]) * x[int64_t{r} * I + i];
      }
      dw[int64_t{o} * I + i] = static_cast<float>(acc);
    }
    double bias_acc = 0;
    for (int r = 0; r < B; ++r) bias_acc += dy[int64_t{r} * O + o];
    db[o] = static_cast<float>(bias_acc);
  }
  if (dx == nullptr) return;
  for (int r = 0; r < B; ++r) {
    for (int i = 0; i < I; ++i) {
      double acc = 0;
      for (int o = 0; o < O; ++o) {
        acc += static_cast<double>(dy[int64_t{r} * O + o]) * w[int64_t{o} * I + i];
      }
      dx[int64_t{r} * I + i] = static_cast<float>(acc);
    }
  }
}

void ReluBackwardInPlace(const float* y, int64_t n, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    if (!(y[i] > 0.0f)) dx[i] = 0.0f;
  }
}

void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int B, int C, float* dlogits,
                         double* loss_sum, int64_t* correct) {
  for (int r = 0; r < B; ++r) {
    const float* row = logits + int64_t{r} * C;
    int argmax = 0;
    for (int c = 1; c < C; ++c) {
      if (row[c] > row[argmax]) argmax = c;
    }
    const double max_logit = row[argmax];
    double sum_exp = 0;
    for (int c = 0; c < C; ++c) sum_exp += std::exp(row[c] - max_logit);
    const int label = labels[r];
    // -log softmax[label] = log(sum exp(l - max)) - (l[label] - max).
    *loss_sum += std::log(sum_exp) - (row[label] - max_logit);
    if (argmax == label) ++*correct;
    for (int c = 0; c < C; ++c) {
      const double p = std::exp(row[c] - max_logit) / sum_exp;
      dlogits[int64_t{r} * C + c] = static_cast<float>((p - (c == label ? 1.0 : 0.0)) / B);
    }
  }
}

void SgdStep(float* p, const float* grad, float* momentum_buf, int64_t n, float lr, float momentum,
             bool nesterov, float weight_decay, bool first_step) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (weight_decay != 0.0f) g += weight_decay * p[i];
    if (momentum != 0.0f) {
      float buf = first_step ? g : momentum * momentum_buf[i] + g;
      momentum_buf[i] = buf;
      g = nesterov ? g + momentum * buf : buf;
    }
    p[i] -= lr * g;
  }
}

void AdamWStep(float* p, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, int64_t step) {
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    p[i] *= 1.0f - lr * weight_decay;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const double m_hat = m[i] / bias_correction1;
    const double v_hat = v[i] / bias_correction2;
    p[i] -= static_cast<float>(lr * m_hat / (std::sqrt(v_hat) + eps));
  }
}

}  // namespace sluice::ref
