#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: install dependencies, build (CUDA parts
# compile and link when nvcc is present), run every test with ctest. GPU tests skip, saying
# why, when no CUDA device is present. Exits non-zero when anything fails. First of all, every
# C++/CUDA source must be formatted as .clang-format says (scripts/check-format.sh).
#   SLUICE_SKIP_SANITIZERS=1  skips the ThreadSanitizer/AddressSanitizer runs of the pipeline
#                             and storage tests (scripts/sanitize.sh).
#   SLUICE_SKIP_FUZZ=1        skips the libFuzzer runs of the shard, IDX, manifest and checkpoint
#                             readers (scripts/fuzz.sh: clang build in build-fuzz, seeded from
#                             the format docs' examples, fails on any crash).
#   SLUICE_FUZZ_SECONDS=N     how long each fuzz target runs (default 15).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/check-format.sh
jobs=$(nproc)
cmake --preset ci
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs"
# The bitwise-equality tests again under every CPU code path this machine can take
# (SLUICE_CPU_ISA caps, OPENBLAS_CORETYPE core types): about 20 s.
bash scripts/test-cpu-paths.sh build
if [[ "${SLUICE_SKIP_SANITIZERS:-0}" != 1 && -x scripts/sanitize.sh ]]; then
  bash scripts/sanitize.sh
fi
if [[ "${SLUICE_SKIP_FUZZ:-0}" != 1 && -x scripts/fuzz.sh ]]; then
  bash scripts/fuzz.sh
fi
