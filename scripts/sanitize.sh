#!/usr/bin/env bash
# Builds and runs the pipeline, device (simulated accelerator) and storage tests under
# ThreadSanitizer and under
# AddressSanitizer + UndefinedBehaviorSanitizer, each in its own build directory.
#   scripts/sanitize.sh [thread|address|all]   (default all)
# Env: SLUICE_SANITIZE_JOBS (default 2), BUILD_ROOT (default the source root).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${SLUICE_SANITIZE_JOBS:-2}
build_root=${BUILD_ROOT:-$root}
which=${1:-all}
targets=(pipeline_test pipeline_device_test device_sim_test engine_sim_backend_test engine_cpu_backend_test engine_memory_test storage_shard_test storage_dataset_test storage_idx_test)

run() {  # name sanitizers
  local dir="$build_root/build-sanitize-$1"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_CUDA=OFF \
    -DSLUICE_BUILD_BENCHMARKS=OFF "-DSLUICE_SANITIZE=$2" >/dev/null
  local present=() all
  # The list is read whole first: `ninja ... | grep -q` under pipefail fails whenever grep
  # exits before ninja has written everything (SIGPIPE), which silently dropped test targets.
  all=$(ninja -C "$dir" -t targets all 2>/dev/null)
  for t in "${targets[@]}"; do
    if grep -q "^$t:" <<<"$all"; then present+=("$t"); fi
  done
  echo "sanitize ($1): ${present[*]}"
  ninja -C "$dir" -j "$jobs" "${present[@]}"
  # gtest_discover_tests registers a *_NOT_BUILT placeholder for every test executable not
  # built above; the rest are exactly the tests of the targets listed. The mpi- and
  # browser-labelled tests are plain add_test commands (mpirun; chromium on sluice-train's
  # page): their programs are not built here, and neither Open MPI nor chromium is instrumented.
  # The bundle-labelled GpuCheckSimRun packs the whole build's tools, which are not built here.
  (cd "$dir" && ctest --output-on-failure -j "$jobs" --exclude-regex '_NOT_BUILT' \
    --label-exclude 'mpi|browser|bundle' --timeout 900)
}

# TBB's scheduler is not built with TSan; tsan.supp lists its library-internal reports only.
export TSAN_OPTIONS="suppressions=$root/scripts/tsan.supp second_deadlock_stack=1 halt_on_error=1 ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1 abort_on_error=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="suppressions=$root/scripts/ubsan.supp print_stacktrace=1 halt_on_error=1 ${UBSAN_OPTIONS:-}"

case "$which" in
  thread) run tsan thread ;;
  address) run asan address,undefined ;;
  all) run tsan thread; run asan address,undefined ;;
  *) echo "usage: $0 [thread|address|all]" >&2; exit 2 ;;
esac
echo "sanitize: OK ($which)"
