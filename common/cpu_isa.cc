#include "common/cpu_isa.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sluice {
namespace {

CpuIsa CapFromEnvironment() {
  const char* value = std::getenv("SLUICE_CPU_ISA");
  if (value == nullptr || *value == '\0') return CpuIsa::kAvx512;
  const absl::string_view v(value);
  if (v == "avx512") return CpuIsa::kAvx512;
  if (v == "avx2") return CpuIsa::kAvx2;
  if (v == "baseline") return CpuIsa::kBaseline;
  const std::string shown(v.substr(0, 40));
  std::fprintf(stderr,
               "sluice: SLUICE_CPU_ISA=%s%s is not baseline, avx2 or avx512; using baseline\n",
               shown.c_str(), v.size() > shown.size() ? "..." : "");
  return CpuIsa::kBaseline;
}

}  // namespace

CpuIsa DetectedCpuIsa() {
#if defined(__x86_64__)
  static const CpuIsa detected = [] {
    __builtin_cpu_init();
    // The compiler's CPU model checks that the OS saves the vector registers too.
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2")) {
      return CpuIsa::kAvx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2")) {
      return CpuIsa::kAvx2;
    }
    return CpuIsa::kBaseline;
  }();
  return detected;
#else
  return CpuIsa::kBaseline;
#endif
}

CpuIsa UsableCpuIsa() {
  static const CpuIsa usable = std::min(DetectedCpuIsa(), CapFromEnvironment());
  return usable;
}

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "baseline";
}

}  // namespace sluice
