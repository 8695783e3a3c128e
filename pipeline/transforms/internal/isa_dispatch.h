// A loop built twice in one file, for x86-64 and for AVX2 (x86-64-v3 without FMA), and picked at
// run time by UsableCpuIsa() (common/cpu_isa.h: SLUICE_CPU_ISA=baseline forces the portable
// build, as scripts/test-cpu-paths.sh does). The body is one always-inline function that both
// builds inline, so they perform the same IEEE operations in the same order (the files that use
// this are built with -ffp-contract=off): the same bits, wider vectors. No ifunc is involved
// (target_clones' resolvers ran before the ThreadSanitizer runtime started and crashed it).
//
//   SLUICE_AVX2_DISPATCH(void, BlendU8, (uint8_t* data, size_t n, float f), (data, n, f)) {
//     for (size_t i = 0; i < n; ++i) ...;
//   }
//
// declares BlendU8(uint8_t*, size_t, float), which runs the body built for the usable level.
#ifndef SLUICE_PIPELINE_TRANSFORMS_INTERNAL_ISA_DISPATCH_H_
#define SLUICE_PIPELINE_TRANSFORMS_INTERNAL_ISA_DISPATCH_H_

#include "common/cpu_isa.h"

namespace sluice::transforms_internal {

// Whether the AVX2 builds may run: the CPU has AVX2 and SLUICE_CPU_ISA does not cap it lower.
inline bool UseAvx2Loops() {
  static const bool use = UsableCpuIsa() >= CpuIsa::kAvx2;
  return use;
}

}  // namespace sluice::transforms_internal

#if defined(__x86_64__)
#define SLUICE_AVX2_DISPATCH(ret, name, params, args)                                             \
  __attribute__((always_inline)) inline ret name##Body params;                                    \
  __attribute__((target("avx2"))) ret name##Avx2 params { return name##Body args; }               \
  ret name##Baseline params { return name##Body args; }                                           \
  ret name params {                                                                               \
    return ::sluice::transforms_internal::UseAvx2Loops() ? name##Avx2 args : name##Baseline args; \
  }                                                                                               \
  __attribute__((always_inline)) inline ret name##Body params
#else
#define SLUICE_AVX2_DISPATCH(ret, name, params, args) ret name params
#endif

#endif  // SLUICE_PIPELINE_TRANSFORMS_INTERNAL_ISA_DISPATCH_H_
