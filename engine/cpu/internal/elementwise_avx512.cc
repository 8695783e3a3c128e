// The element-wise loops for the avx512 level (built with -march=x86-64-v4; engine/CMakeLists.txt).
#include "engine/cpu/internal/elementwise.h"

#define SLUICE_ELEMENTWISE_LEVEL avx512
#define SLUICE_ELEMENTWISE_NAME "avx512"
#include "engine/cpu/internal/elementwise_loops.inc"
