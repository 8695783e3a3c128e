// Plain, obviously-correct CPU implementations of every operation of a training step. They are
// the CPU reference that each CUDA kernel is tested against (tol = atol + |ref| * rtol), and
// the building blocks of the CPU backend where no faster path exists.
// All tensors are fp32, row-major. B = batch, I = in features, O = out features, C = classes.
#ifndef SLUICE_ENGINE_CPU_REFERENCE_OPS_H_
#define SLUICE_ENGINE_CPU_REFERENCE_OPS_H_

#include <cstdint>

#include "engine/model.h"

namespace sluice::ref {

// out[i] = (in[i] / 255 - mean) / std, n values.
void NormalizeU8(const uint8_t* in, int64_t n, float mean, float std, float* out);

// y[B,O] = x[B,I] * W[O,I]^T + b[O]; then y = max(y, 0) when `relu`.
void LinearForward(const float* x, const float* w, const float* b, int B, int I, int O, bool relu,
                   float* y);

// Given dy[B,O] (gradient w.r.t. the Linear's output, after any ReLU backward):
//   dW[O,I] = dy^T x, db[O] = sum over batch of dy, and dx[B,I] = dy W when dx != nullptr.
void LinearBackward(const float* x, const float* w, const float* dy, int B, int I, int O, float* dw,
                    float* db, float* dx);

// dx[i] = y[i] > 0 ? dx[i] : 0 (in place), where y is the ReLU output.
void ReluBackwardInPlace(const float* y, int64_t n, float* dx);

// Softmax cross-entropy, mean over the batch (as nn.CrossEntropyLoss):
//   dlogits[b,c] = (softmax(logits[b])[c] - [c == label[b]]) / B;
//   *loss_sum += sum over b of -log softmax(logits[b])[label[b]];
//   *correct += number of b with argmax(logits[b]) == label[b] (first max wins).
// Labels must be in [0, C).
void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int B, int C, float* dlogits,
                         double* loss_sum, int64_t* correct);

// torch.optim.SGD semantics, one tensor of n values:
//   g = grad + weight_decay * p; if momentum: buf = momentum * buf + g (buf = g on the first
//   step, i.e. when `first_step`), g = nesterov ? g + momentum * buf : buf; p -= lr * g.
void SgdStep(float* p, const float* grad, float* momentum_buf, int64_t n, float lr, float momentum,
             bool nesterov, float weight_decay, bool first_step);

// torch.optim.AdamW semantics; `step` is the 1-based step count after this update:
//   p *= 1 - lr * weight_decay; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr * (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps).
void AdamWStep(float* p, const float* grad, float* m, float* v, int64_t n, float lr, float beta1,
               float beta2, float eps, float weight_decay, int64_t step);

}  // namespace sluice::ref

#endif  // SLUICE_ENGINE_CPU_REFERENCE_OPS_H_
