#!/usr/bin/env bash
# The GPU path on a real GPU, in one call of the device tool (docs/cuda.md, "First contact").
#
#   scripts/gpu-check.sh prepare [--no-build] [BUNDLE_DIR]   on this machine (no GPU needed):
#       build with CUDA for sm_90 (--no-build: pack what $SLUICE_GPU_BUILD already holds), gather
#       into BUNDLE_DIR (default out/gpu-bundle, an ignored path) the binaries, the gpu-labelled
#       test executables, the benchmarks, the non-system shared libraries they need (not libc,
#       libcuda, cuBLAS, NCCL: the GPU machine has those; libstdc++/libgcc_s go to lib-fallback/,
#       used only where the machine's own are too old), a Fashion-MNIST shard dataset and
#       run.sh; then pack it as BUNDLE_DIR.tar.zst, the one file to carry (< 60 MiB; the
#       device tool takes 64 MiB in all). Unpack it there with `cmake -E tar xf`.
#   BUNDLE_DIR/run.sh [--sim] [LOG_DIR]                      on the GPU machine (scripts/gpu-runner.sh).
#   scripts/gpu-check.sh selftest [BUNDLE_DIR]               prepare --no-build, then run.sh --sim
#       under a short deadline, then checks what a GPU run depends on: the packed size, at most 8
#       files under the log directory, and every summary row present and parsed (ctest runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SLUICE_GPU_BUILD:-build}
MAX_PACKED_MIB=60
# The rows every run.sh summary holds, GPU or not (selftest checks them).
SUMMARY_ROWS=("GPU, driver, memory" "gpu tests" "reference-auto" "reference-cpu"
  "reference job verdict" "u8-batch32" "u8 batch 32: copy time hidden" "u8 batch 32: compute"
  "cuda-graph" "NCCL world of 1" "large-b1024" "pipeline benchmark" "cuda kernel harness"
  "sluice Python module on CUDA" "PyTorch reference script on the GPU" "deadline")

gather_tests() {  # bundle: the gpu-labelled test executables and their gtest filters
  local bundle=$1
  (cd "$BUILD" && ctest -L gpu --show-only=json-v1) | python3 -c '
import json, sys, collections
tests = json.load(sys.stdin)["tests"]
by = collections.defaultdict(list)
for t in tests:
    cmd = t.get("command") or []
    if not cmd: continue
    name = next((a.split("=", 1)[1] for a in cmd if a.startswith("--gtest_filter=")), None)
    by[cmd[0]].append(name or "*")
for exe, names in by.items():
    print(exe + "\t" + ":".join(names))
' > "$bundle/tests/gpu-tests.tsv"
  while IFS=$'\t' read -r exe _; do cp "$exe" "$bundle/tests/"; done < "$bundle/tests/gpu-tests.tsv"
  sed -i 's|^[^\t]*/||' "$bundle/tests/gpu-tests.tsv"  # keep base names
}

gather_libs() {  # bundle: non-system shared libraries of the bundled executables
  local bundle=$1 lib
  for f in "$bundle"/bin/* "$bundle"/tests/*; do
    [[ -x "$f" && ! -d "$f" ]] || continue
    ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | \
        libcublas* | libcudart* | libnccl* | libnvidia*) ;;
      # Every Linux has these; a newer one is needed only where the machine's is older than ours.
      libstdc++.so* | libgcc_s.so*) cp -L "$lib" "$bundle/lib-fallback/" ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
}

pack() {  # bundle -> bundle.tar.zst; fails over MAX_PACKED_MIB
  local bundle=$1 packed=$1.tar.zst size
  rm -f "$packed"
  if command -v zstd > /dev/null; then
    tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" |
      zstd -q -"${SLUICE_GPU_CHECK_ZSTD_LEVEL:-19}" -T0 -o "$packed" -f
  else
    (cd "$(dirname "$bundle")" && cmake -E tar cf "$packed" --zstd "$(basename "$bundle")")
  fi
  size=$(stat -c %s "$packed")
  echo "gpu-check: bundle $bundle ($(du -sh "$bundle" | cut -f1)), packed $packed:" \
    "$((size / 1048576)) MiB (at most $MAX_PACKED_MIB)" >&2
  if ((size > MAX_PACKED_MIB * 1048576)); then
    echo "gpu-check: $packed is $((size / 1048576)) MiB, over $MAX_PACKED_MIB MiB: it cannot travel" >&2
    return 1
  fi
}

prepare() {
  local build=1
  if [[ "${1:-}" == --no-build ]]; then build=0 && shift; fi
  local bundle
  bundle=$(realpath -m "${1:-out/gpu-bundle}")
  if ((build)); then
    echo "gpu-check: building with CUDA into $BUILD" >&2
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_CUDA=ON > /dev/null
    cmake --build "$BUILD" -j "$(nproc)"
  fi
  rm -rf "$bundle" "$bundle.tar.zst" && mkdir -p "$bundle"/{bin,lib,lib-fallback,tests,data,bench}
  cp "$BUILD"/tools/sluice-train "$BUILD"/tools/sluice-shard "$bundle/bin/"
  for b in "$BUILD"/bench/pipeline_benchmark "$BUILD"/bench/sluice-cuda-bench; do
    if [[ -x "$b" ]]; then cp "$b" "$bundle/bin/"; fi
  done
  gather_tests "$bundle"
  gather_libs "$bundle"
  strip --strip-unneeded "$bundle"/bin/* "$bundle"/tests/* "$bundle"/lib/* 2> /dev/null || true
  # Fashion-MNIST, sharded at a high zstd level to keep the bundle small.
  local fm=${SLUICE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist} split prefix
  for split in train test; do
    prefix=$([[ $split == train ]] && echo train || echo t10k)
    "$BUILD/tools/sluice-shard" create --quiet --images "$fm/$prefix-images-idx3-ubyte.gz" \
      --labels "$fm/$prefix-labels-idx1-ubyte.gz" --out "$bundle/data" --split $split \
      --zstd-level 19
  done
  cp bench/pytorch_reference.py "$bundle/bench/"
  cp scripts/gpu-runner.sh "$bundle/run.sh"
  chmod +x "$bundle/run.sh"
  pack "$bundle"
}

# Checks a run.sh log directory: at most 8 files (what comes back from the device tool), every
# summary row there, none unparsed.
check_logs() {
  local logs=$1 summary=$1/summary.txt bad=0 row n
  n=$(find "$logs" -type f | wc -l)
  if ((n > 8)); then
    echo "gpu-check: $n files under $logs; the device tool returns at most 8" >&2
    bad=1
  fi
  for row in "${SUMMARY_ROWS[@]}"; do
    if ! grep -q -F "$row" "$summary"; then
      echo "gpu-check: the summary has no row '$row'" >&2
      bad=1
    fi
  done
  if grep -E 'UNPARSED|out of time' "$summary" >&2; then
    echo "gpu-check: a step's output could not be parsed, or a step ran out of time (above)" >&2
    bad=1
  fi
  return $bad
}

selftest() {
  local bundle=${1:-$(mktemp -d)/gpu-bundle}
  prepare --no-build "$bundle"
  local logs
  logs=$(dirname "$bundle")/logs
  rm -rf "$logs"
  local rc=0
  SLUICE_GPU_CHECK_EPOCHS=${SLUICE_GPU_CHECK_EPOCHS:-1} \
    SLUICE_GPU_CHECK_DEADLINE_S=${SLUICE_GPU_CHECK_DEADLINE_S:-240} \
    "$bundle/run.sh" --sim "$logs" || rc=$?
  check_logs "$logs" || rc=1
  return $rc
}

case "${1:-}" in
  prepare) shift && prepare "$@" ;;
  selftest) shift && selftest "$@" ;;
  check-logs) shift && check_logs "$@" ;;
  *) sed -n '2,17p' "$0" >&2 && exit 2 ;;
esac
