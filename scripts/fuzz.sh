#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/storage/fuzz, tests/engine/fuzz) with clang in build-fuzz
# and runs every fuzz ctest entry (label `fuzz`) for a bounded time each, starting from the
# committed seeds (taken from the format docs' examples). Exits non-zero when any target finds a
# crash, a sanitizer report or a broken invariant; the input that did it is left in build-fuzz as
# tests/*/fuzz/crash_<target>-*.
# Env: SLUICE_FUZZ_SECONDS  seconds each target fuzzes (default 15)
#      SLUICE_FUZZ_JOBS     build and ctest parallelism (default 2)
#      BUILD_ROOT           where build-fuzz goes (default the source root)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${SLUICE_FUZZ_SECONDS:-15}
jobs=${SLUICE_FUZZ_JOBS:-2}
dir="${BUILD_ROOT:-$root}/build-fuzz"
targets=(shard_reader_fuzzer idx_reader_fuzzer manifest_reader_fuzzer checkpoint_reader_fuzzer
  npy_reader_fuzzer image_structure_fuzzer)

CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSLUICE_FUZZ=ON -DSLUICE_CUDA=OFF \
  -DSLUICE_BUILD_BENCHMARKS=OFF "-DSLUICE_FUZZ_SECONDS=$seconds" >/dev/null
ninja -C "$dir" -j "$jobs" "${targets[@]}"
# Only the fuzz entries: the unit tests of this build are not built (their *_NOT_BUILT
# placeholders are excluded too).
rm -f "$dir"/tests/*/fuzz/crash_*
if ! (cd "$dir" && ctest --output-on-failure -L fuzz --exclude-regex '_NOT_BUILT' -j "$jobs"); then
  echo "fuzz.sh: a fuzz target failed; crashing inputs:" >&2
  ls "$dir"/tests/*/fuzz/crash_* >&2 2>/dev/null || true
  exit 1
fi
