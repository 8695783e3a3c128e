// The element-wise loops for the avx2 level (built with -march=x86-64-v3; engine/CMakeLists.txt).
#include "engine/cpu/internal/elementwise.h"

#define SLUICE_ELEMENTWISE_LEVEL avx2
#define SLUICE_ELEMENTWISE_NAME "avx2"
#include "engine/cpu/internal/elementwise_loops.inc"
