// The CPU backend's element-wise loops, built once per instruction-set level
// (elementwise_loops.inc, compiled by elementwise_baseline.cc, elementwise_avx2.cc and
// elementwise_avx512.cc with -march=x86-64, x86-64-v3 and x86-64-v4) and all with
// -ffp-contract=off: every level performs the same IEEE operations in the same order on each
// element, so the levels differ in vector width only, never in a result bit. That keeps every
// bitwise promise (a thread count, sim = cpu, resume, the world of one) true on any CPU, and
// equal across CPUs for these loops. Elementwise() returns the table of the highest level that
// UsableCpuIsa() allows (common/cpu_isa.h: SLUICE_CPU_ISA caps it).
//
// This header is included by code compiled for AVX-512, so it declares no inline function:
// whatever such a file instantiates may be picked by the linker for every caller.
// Thread safety: stateless; callers own the buffers.
#ifndef SLUICE_ENGINE_CPU_INTERNAL_ELEMENTWISE_H_
#define SLUICE_ENGINE_CPU_INTERNAL_ELEMENTWISE_H_

#include <cstdint>

namespace sluice::cpu_internal {

struct ElementwiseKernels {
  const char* level;
  // dst[i] += src[i].
  void (*add_in_place)(const float* src, int64_t n, float* dst);
  // db[o] = sum over b of dy[b, o], in batch order.
  void (*bias_grad)(const float* dy, int B, int O, float* db);
  // dx[i] = y[i] > 0 ? dx[i] : 0.
  void (*relu_backward)(const float* y, int64_t n, float* dx);
  // (in / 255 - mean) / std.
  void (*normalize_u8)(const uint8_t* in, int64_t n, float mean, float std, float* out);
  // torch.optim.SGD's update (see SgdUpdate in cpu_kernels.h).
  void (*sgd)(float* p, const float* grad, float* momentum_buf, int64_t n, float lr, float momentum,
              bool nesterov, float weight_decay, bool first_step);
  // AdamW's loop, with the step's scalars already computed (AdamWUpdate in cpu_kernels.cc).
  void (*adamw)(float* p, const float* grad, float* m, float* v, int64_t n, float beta1,
                float beta2, float eps, float step_size, float inv_sqrt_bc2, float decay);
};

// The table for UsableCpuIsa().
const ElementwiseKernels& Elementwise();

// Each level's table (elementwise_<level>.cc); the AVX2 and AVX-512 ones exist on x86-64 only.
namespace baseline {
extern const ElementwiseKernels kElementwise;
}
namespace avx2 {
extern const ElementwiseKernels kElementwise;
}
namespace avx512 {
extern const ElementwiseKernels kElementwise;
}

}  // namespace sluice::cpu_internal

#endif  // SLUICE_ENGINE_CPU_INTERNAL_ELEMENTWISE_H_
