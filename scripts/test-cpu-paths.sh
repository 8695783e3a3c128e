#!/usr/bin/env bash
# Runs sluice's bitwise-equality tests once per CPU code path this machine can take, as if on
# other CPUs (docs/architecture.md, "Per-CPU code paths"):
#   - sluice's own kernels capped by SLUICE_CPU_ISA (baseline, avx2, and the CPU's own level);
#   - OpenBLAS's kernels forced by OPENBLAS_CORETYPE to every core type this CPU can run
#     (Nehalem, Sandybridge, Haswell, Zen, SkylakeX, Cooperlake, by the CPU's flags).
# Each configuration runs the tests that compare two runs bitwise (a world of one against the
# same update path, sim against cpu, thread counts, resume, the vector converters and resize
# against their portable loops, ColorJitter's and PIL resampling's loops against torchvision and
# PIL), and sluice-train's own check: --exchange-always against
# --fused-sgd=false on the sim device, equal weights byte for byte.
#   scripts/test-cpu-paths.sh [BUILD_DIR]   (default build; run after the build)
# Exits non-zero when any configuration fails, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tests='BitwisePromises|CpuBatchSplit|CpuBackendTest|SimBackend\.|ResumeTest\.|Convert\.|F32ToBf16\.|ChannelsLastAndBf16|InterleavedResize|FusedChain|SameSamplesForOneAndTwoThreads|SameBatchesWhateverThreads|python_isa_oracles'
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }

configs=("SLUICE_CPU_ISA=baseline" "SLUICE_CPU_ISA=avx2" "SLUICE_CPU_ISA=avx512")
has sse4_2 && configs+=("OPENBLAS_CORETYPE=Nehalem")
has avx && configs+=("OPENBLAS_CORETYPE=Sandybridge")
has avx2 && has fma && configs+=("OPENBLAS_CORETYPE=Haswell" "OPENBLAS_CORETYPE=Zen")
if has avx512f && has avx512bw && has avx512dq && has avx512vl; then
  configs+=("OPENBLAS_CORETYPE=SkylakeX")
  has avx512_bf16 && configs+=("OPENBLAS_CORETYPE=Cooperlake")
fi

# A small dataset for the command-line check: 2,048 Fashion-MNIST-shaped records.
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
/usr/bin/python3 - "$data" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(1)
x = (rng.random((2048, 28, 28)) < 0.5) * rng.integers(0, 256, (2048, 28, 28))
np.save(sys.argv[1] + "/x.npy", x.astype(np.uint8))
np.save(sys.argv[1] + "/y.npy", rng.integers(0, 10, 2048).astype(np.uint8))
PY
"$build/tools/sluice-shard" create --images "$data/x.npy" --labels "$data/y.npy" \
  --out "$data/ds" --records-per-frame 256 --quiet >/dev/null

failed=()
for config in "${configs[@]}"; do
  echo "== $config"
  if ! env "$config" ctest --test-dir "$build" -R "$tests" -j "$(nproc)" \
      --output-on-failure --timeout 300 >"$data/ctest.log" 2>&1; then
    cat "$data/ctest.log"
    failed+=("$config (ctest)")
  else
    grep -E "tests passed|tests failed" "$data/ctest.log"
  fi
  sums=()
  for side in --fused-sgd=false --exchange-always; do
    env "$config" "$build/tools/sluice-train" --data "$data/ds" --device sim --epochs 1 \
      --batch-size 32 --evaluate=false --report=false --quiet "$side" \
      --export-safetensors "$data/w$side.safetensors" >/dev/null
    sums+=("$(md5sum <"$data/w$side.safetensors" | cut -c1-12)")
  done
  if [[ "${sums[0]}" == "${sums[1]}" ]]; then
    echo "world of one vs the same update path without it: equal (${sums[0]})"
  else
    echo "world of one vs the same update path without it: DIFFER (${sums[0]} vs ${sums[1]})"
    failed+=("$config (world of one)")
  fi
done
if ((${#failed[@]})); then
  printf 'FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "every CPU code path: ${#configs[@]} configurations passed"
