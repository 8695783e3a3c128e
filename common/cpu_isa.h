// The instruction-set level that sluice's own CPU kernels may use: the CPU's, capped by the
// SLUICE_CPU_ISA environment variable, so that a test suite runs on any CPU as if on an older
// one (docs/architecture.md, "Per-CPU code paths").
//
//   SLUICE_CPU_ISA=baseline  x86-64 only: the portable loops everywhere
//   SLUICE_CPU_ISA=avx2      at most x86-64-v3 (AVX2, FMA, F16C): no AVX-512 kernel
//   SLUICE_CPU_ISA=avx512    at most x86-64-v4 (AVX-512 F/CD/BW/DQ/VL): the CPU's own level
//   unset or empty           the CPU's own level
//
// A cap above the CPU's level changes nothing; an unknown value is treated as `baseline` (it
// runs on any CPU) and named once on stderr. What each level selects:
//   - the CPU backend's AVX-512 sparse-input kernels (engine/cpu/cpu_kernels.cc): avx512;
//   - its element-wise loops (engine/cpu/internal/elementwise.h): one build per level, which
//     compute bitwise the same result, so the level changes their speed only;
//   - the AVX2 u8 -> f32/f16 converter (pipeline/convert.cc) and the AVX2 interleaved resize
//     (pipeline/transforms/internal/bilinear_interleaved.cc), both bitwise equal to their
//     portable loops (tested): avx2.
// OpenBLAS picks its own kernels; OPENBLAS_CORETYPE forces them (docs/architecture.md).
//
// Thread safety: UsableCpuIsa() reads the environment once, on its first call, and is safe to
// call from any thread.
#ifndef SLUICE_COMMON_CPU_ISA_H_
#define SLUICE_COMMON_CPU_ISA_H_

#include "absl/strings/string_view.h"

namespace sluice {

enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The highest level the CPU supports (and the OS saves the registers of).
CpuIsa DetectedCpuIsa();
// min(DetectedCpuIsa(), the SLUICE_CPU_ISA cap): the level sluice's kernels use.
CpuIsa UsableCpuIsa();
// "baseline", "avx2", "avx512".
absl::string_view CpuIsaName(CpuIsa isa);

}  // namespace sluice

#endif  // SLUICE_COMMON_CPU_ISA_H_
