#!/usr/bin/env bash
# The GPU path on a real GPU, in one call.
#
#   scripts/gpu-check.sh prepare [BUNDLE_DIR]   on this machine (no GPU needed): build with CUDA
#       for sm_90, gather into BUNDLE_DIR (default gpu-bundle/) the binaries, the gpu-labelled
#       test executables, the benchmarks, the non-system shared libraries they need (not libcuda
#       or cuBLAS: the GPU machine has those), a Fashion-MNIST shard dataset and run.sh; then
#       pack it as BUNDLE_DIR.tar.zst (< 60 MiB).
#   BUNDLE_DIR/run.sh [LOG_DIR]                  on the GPU machine (no network, no installs), or
#       here: prints the GPU and driver, runs every gpu-labelled test, the reference job with the
#       bottleneck report and trace, the u8 overlap check, a larger configuration, the pipeline
#       benchmark with uploads, the CUDA kernel/GEMM harness (H2D pinned vs pageable and cuBLAS
#       rates), PyTorch on the same GPU when it is installed, and ends with a summary table.
#       Logs go to LOG_DIR (default BUNDLE_DIR/logs). Without a GPU every gpu test skips,
#       saying why, and the GPU-only steps are reported as skipped.
#   scripts/gpu-check.sh selftest                prepare + run.sh here (CI-sized: 1 epoch).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${SLUICE_GPU_BUILD:-build}

prepare() {
  local bundle=${1:-gpu-bundle}
  bundle=$(realpath -m "$bundle")
  echo "gpu-check: building with CUDA into $BUILD" >&2
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_CUDA=ON >/dev/null
  cmake --build "$BUILD" -j "$(nproc)"
  rm -rf "$bundle" && mkdir -p "$bundle"/{bin,lib,tests,data,bench}
  cp "$BUILD"/tools/sluice-train "$BUILD"/tools/sluice-shard "$bundle/bin/"
  for b in "$BUILD"/bench/pipeline_benchmark "$BUILD"/bench/storage_benchmark \
           "$BUILD"/bench/engine_benchmark "$BUILD"/bench/sluice-cuda-bench; do
    [[ -x "$b" ]] && cp "$b" "$bundle/bin/"
  done
  # The executables of every gpu-labelled test, and the gtest filter of their gpu tests.
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
  while IFS=$'\t' read -r exe filter; do
    cp "$exe" "$bundle/tests/"
  done < "$bundle/tests/gpu-tests.tsv"
  sed -i 's|^[^\t]*/||' "$bundle/tests/gpu-tests.tsv"   # keep base names
  # Non-system shared libraries (the GPU machine has libc, libcuda and the CUDA toolkit).
  for f in "$bundle"/bin/* "$bundle"/tests/*; do
    [[ -x "$f" && ! -d "$f" ]] || continue
    ldd "$f" 2>/dev/null | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libcuda.so*|libcublas*|libcudart*|libnccl*|libnvidia*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
  strip --strip-unneeded "$bundle"/bin/* "$bundle"/tests/* "$bundle"/lib/* 2>/dev/null || true
  # Fashion-MNIST, sharded at a high zstd level to keep the bundle small.
  local fm=/usr/share/datasets/fashion-mnist
  "$BUILD/tools/sluice-shard" create --quiet --images $fm/train-images-idx3-ubyte.gz \
      --labels $fm/train-labels-idx1-ubyte.gz --out "$bundle/data" --split train --zstd-level 19
  "$BUILD/tools/sluice-shard" create --quiet --images $fm/t10k-images-idx3-ubyte.gz \
      --labels $fm/t10k-labels-idx1-ubyte.gz --out "$bundle/data" --split test --zstd-level 19
  cp bench/pytorch_reference.py "$bundle/bench/"
  cp scripts/gpu-runner.sh "$bundle/run.sh"
  chmod +x "$bundle/run.sh"
  tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | zstd -q -19 -T0 -o "$bundle.tar.zst" -f
  local size
  size=$(stat -c %s "$bundle.tar.zst")
  echo "gpu-check: bundle $bundle ($(du -sh "$bundle" | cut -f1)), packed $bundle.tar.zst: $((size / 1048576)) MiB" >&2
  if ((size > 60 * 1048576)); then echo "gpu-check: bundle over 60 MiB" >&2; exit 1; fi
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  selftest)
    shift
    dir=${1:-$(mktemp -d)/gpu-bundle}
    prepare "$dir"
    SLUICE_GPU_CHECK_EPOCHS=1 "$dir/run.sh" "$dir/logs"
    ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
