// The element-wise loops for the baseline level (built with -march=x86-64 (the default);
// engine/CMakeLists.txt).
#include "engine/cpu/internal/elementwise.h"

#define SLUICE_ELEMENTWISE_LEVEL baseline
#define SLUICE_ELEMENTWISE_NAME "baseline"
#include "engine/cpu/internal/elementwise_loops.inc"
