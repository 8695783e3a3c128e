#!/usr/bin/env bash
# run.sh of a GPU bundle made by scripts/gpu-check.sh prepare. Runs on the GPU machine (or
# anywhere: without a GPU the gpu tests skip, saying why, and GPU-only steps say "skipped").
#   run.sh [LOG_DIR]   env: SLUICE_GPU_CHECK_EPOCHS (default 10)
# Each step has a time limit so the whole call stays under 8 minutes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
logs=${1:-$here/logs}
mkdir -p "$logs"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
epochs=${SLUICE_GPU_CHECK_EPOCHS:-10}
summary=$logs/summary.txt
: > "$summary"
failures=0   # run.sh exits non-zero when a test or a training run failed
row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$summary"; }
step() { echo "== $1" >&2; }

step "GPU and driver"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi > "$logs/nvidia-smi.txt" 2>&1
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
else
  gpu="none (no nvidia-smi)"
fi
row "GPU, driver, memory" "${gpu:-none}"

step "gpu-labelled tests"
pass=0; fail=0; skip=0
while IFS=$'\t' read -r exe filter; do
  log="$logs/test-$exe.log"
  timeout 240 "$here/tests/$exe" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?
  p=$(grep -c '^\[       OK \]' "$log"); s=$(grep -c '^\[  SKIPPED \]' "$log"); f=$(grep -c '^\[  FAILED  \].*ms)$' "$log")
  pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
  ((rc != 0 && f == 0)) && fail=$((fail + 1)) && echo "$exe exited $rc" >> "$log"
done < "$here/tests/gpu-tests.tsv"
row "gpu tests" "$pass passed, $fail failed, $skip skipped"
failures=$((failures + fail))
grep -h -m1 -o 'no CUDA device.*' "$logs"/test-*.log 2>/dev/null | head -1 | sed 's/^/  skip reason: /' | tee -a "$summary"

run_train() {  # name, then sluice-train flags
  local name=$1; shift
  timeout 180 "$here/bin/sluice-train" --data "$here/data" --quiet "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  local sps acc wall
  sps=$(grep -oP 'training \(\K[0-9.]+(?= samples/s)' "$logs/$name.log" | tail -1)
  acc=$(grep -oP 'final test accuracy: \K[0-9.]+' "$logs/$name.log" | tail -1)
  wall=$(grep -oP 'samples in \K[0-9.]+(?=s of training)' "$logs/$name.log" | tail -1)
  verdict=$(grep -m1 -oP '^(verdict: )?\K(input-bound|partly-input-bound|compute-bound|launch-bound|cpu-bound)[^.]*' "$logs/$name.log" | head -1)
  if ((rc != 0)); then
    failures=$((failures + 1))
    row "$name" "exit $rc: $(tail -1 "$logs/$name.log")"
  else
    row "$name" "train loop ${wall:-?}s, ${sps:-?} samples/s, test acc ${acc:-n/a}; ${verdict:-}"
  fi
}

step "reference job on the best device"
run_train reference-auto --epochs "$epochs" --batch-size 32 --lr 0.01 --device auto \
  --report-json "$logs/reference-report.json" --trace "$logs/reference-trace.json"
step "reference job, CPU backend (accuracy parity)"
run_train reference-cpu --epochs "$epochs" --batch-size 32 --lr 0.01 --device cpu
if [[ -f "$logs/reference-report.json" ]]; then
  python3 - "$logs/reference-report.json" <<'PYEOF' | tee -a "$summary"
import json, sys
r = json.load(open(sys.argv[1]))
c = r.get("ceilings") or {}
def fmt(k):
    x = c.get(k) or {}
    return f"{x['mb_per_s'] / 1000:.1f} GB/s" if x.get("measured") else x.get("note", "n/a")
print(f"{'H2D pinned / pageable (batch 32)':<44} {fmt('h2d_pinned')} / {fmt('h2d_pageable')}")
comp = c.get("compute") or {}
print(f"{'compute ceiling (train steps, this model)':<44} " +
      (f"{comp['samples_per_s']:.0f} samples/s" if comp.get("measured") else comp.get("note", "n/a")))
print(f"{'reference job verdict':<44} {r.get('verdict', {}).get('sentence', '?') if isinstance(r.get('verdict'), dict) else r.get('verdict')}")
PYEOF
fi
step "u8 over PCIe at batch 32 (copy hidden behind compute?)"
run_train u8-batch32 --epochs 2 --batch-size 32 --device auto --h2d-format u8 \
  --report-json "$logs/u8-report.json" --trace "$logs/u8-trace.json"
if [[ -f "$logs/u8-trace.json" ]]; then
  # The trace's own figure (otherData.copy_hidden_share): copy-stream spans are device time from
  # the uploader's events, compute spans device time from the compute stream's events, both on
  # the host clock; and the report's compute busy (device time) vs host enqueue.
  python3 - "$logs/u8-trace.json" "$logs/u8-report.json" <<'PYEOF' | tee -a "$summary"
import json, sys
j = json.load(open(sys.argv[1]))
share = j.get("otherData", {}).get("copy_hidden_share", -1)
n = sum(1 for e in j["traceEvents"] if e.get("ph") == "X" and e.get("name") == "h2d")
print(f"{'u8 batch 32: copy time hidden behind compute':<44} " +
      (f"{100 * share:.1f}% of {n} copies" if share >= 0 else "no h2d spans in the trace"))
r = json.load(open(sys.argv[2]))
st = {s["stage"]: s for s in r.get("stages", [])}
c = st.get("compute", {})
print(f"{'u8 batch 32: compute device busy / host enqueue':<44} "
      f"{c.get('busy_pct', 0):.0f}% / {r.get('compute_host_pct', 0):.0f}% of training time; "
      f"verdict {r.get('verdict', {}).get('class', '?')}")
PYEOF
fi
step "NCCL path, world of 1 (the data-parallel exchange on one GPU)"
if [[ "$gpu" == none* ]]; then
  row "nccl-world1" "skipped: NCCL needs a GPU (no GPU here)"
else
  # A sum over one rank changes nothing: the run through NCCL must end bitwise equal to the same
  # run without the exchange.
  run_train cuda-no-exchange --epochs 2 --batch-size 32 --device cuda \
    --export-safetensors "$logs/no-exchange.safetensors"
  run_train nccl-world1 --epochs 2 --batch-size 32 --device cuda --exchange-always \
    --export-safetensors "$logs/nccl-world1.safetensors"
  if cmp -s "$logs/no-exchange.safetensors" "$logs/nccl-world1.safetensors"; then
    row "NCCL world of 1 vs no exchange" "bitwise equal weights"
  else
    failures=$((failures + 1))
    row "NCCL world of 1 vs no exchange" "weights DIFFER (or a run failed)"
  fi
fi
step "larger configuration"
if [[ "$gpu" == none* ]]; then
  row "large-b1024" "skipped: 784-4096-4096-10 is a GPU configuration (no GPU here)"
else
  run_train large-b1024 --epochs 2 --batch-size 1024 --layers 784,4096,4096,10 --device auto \
    --report-json "$logs/large-report.json"
fi

if [[ -x "$here/bin/pipeline_benchmark" ]]; then
  step "pipeline benchmark"
  timeout 120 "$here/bin/pipeline_benchmark" --benchmark_min_time=0.2 \
    --benchmark_out="$logs/pipeline_benchmark.json" --benchmark_out_format=json \
    > "$logs/pipeline_benchmark.txt" 2>&1
  row "pipeline benchmark" "exit $? (see pipeline_benchmark.txt)"
fi
if [[ -x "$here/bin/sluice-cuda-bench" ]]; then
  step "CUDA kernels, GEMMs, H2D"
  timeout 120 "$here/bin/sluice-cuda-bench" --batch 32 > "$logs/cuda-bench-b32.txt" 2>&1
  rc=$?
  timeout 60 "$here/bin/sluice-cuda-bench" --batch 1024 \
    > "$logs/cuda-bench-b1024.txt" 2>&1
  row "cuda kernel harness" "exit $rc (see cuda-bench-*.txt)"
fi

step "PyTorch on the same GPU"
if python3 -c 'import torch, torchvision; assert torch.cuda.is_available()' 2>/dev/null; then
  raw=$(mktemp -d)/FashionMNIST/raw && mkdir -p "$raw"
  "$here/bin/sluice-shard" export "$here/data" --split train --out "$raw/train" >/dev/null
  "$here/bin/sluice-shard" export "$here/data" --split test --out "$raw/t10k" >/dev/null
  timeout 240 python3 "$here/bench/pytorch_reference.py" --root "$(dirname "$(dirname "$raw")")" \
    --epochs "$epochs" --device cuda > "$logs/pytorch-cuda.json" 2> "$logs/pytorch-cuda.err"
  row "PyTorch reference script on the GPU" "$(cat "$logs/pytorch-cuda.json" 2>/dev/null | tail -1)"
else
  row "PyTorch reference script on the GPU" "skipped: no torch with CUDA here"
fi
echo
echo "summary ($summary):"
cat "$summary"
if ((failures > 0)); then
  echo "gpu-check: $failures failure(s); see $logs" >&2
  exit 1
fi
