#!/usr/bin/env bash
# run.sh of a GPU bundle made by scripts/gpu-check.sh prepare. Runs on the GPU machine (or
# anywhere: without a GPU the gpu tests skip, saying why, and GPU-only steps say "skipped").
#   run.sh [--sim] [LOG_DIR]
#     --sim    use `--device sim` wherever a GPU run would use cuda (CI runs the runner so)
#     LOG_DIR  default $OUT when set (the device tool's return folder), else BUNDLE/logs
#   env: SLUICE_GPU_CHECK_EPOCHS (default 3), SLUICE_GPU_CHECK_DEADLINE_S (default 420)
# The whole run has one deadline; each step gets a share of the time left, in proportion to its
# weight, so time an early step did not use goes to the later ones. A step cut at its share is
# reported "out of time" and the rest still run. Every log and trace is written to a scratch
# folder; LOG_DIR gets two files: summary.txt and gpu-check-logs.tar.gz (trimmed to 15 MiB),
# because the device tool returns at most 8 files of at most 16 MiB.
# The library path is set for sluice's own binaries only (sluice_env), never for python3.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sim=0
if [[ "${1:-}" == --sim ]]; then sim=1 && shift; fi
logs=${1:-${OUT:-$here/logs}}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-gpu-check.XXXXXX")
epochs=${SLUICE_GPU_CHECK_EPOCHS:-3}
deadline_s=${SLUICE_GPU_CHECK_DEADLINE_S:-420}
archive_reserve_s=15 # kept back from the steps for the archive at the end
started=$SECONDS
summary=$logs/summary.txt
: > "$summary"
failures=0 # run.sh exits non-zero when a test, a run, a parse or a deadline failed
row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$summary"; }
step() { echo "== $1 ($((SECONDS - started))s of ${deadline_s}s used)" >&2; }
fail() { failures=$((failures + 1)); }

# Step weights; the shares are taken from what is left of the deadline.
declare -A weight=([tests]=30 [ref_auto]=10 [ref_cpu]=12 [u8]=5
  [graph]=5 [nccl]=8 [large]=8 [pipeline]=6 [bench]=6 [pytorch]=12)
pending_weight=0
for w in "${weight[@]}"; do pending_weight=$((pending_weight + w)); done
share_s=0
take_share() { # key: sets share_s, the seconds this step may run (0: none left)
  local w=${weight[$1]} left=$((deadline_s - archive_reserve_s - (SECONDS - started)))
  share_s=$((left > 0 ? left * w / pending_weight : 0))
  pending_weight=$((pending_weight - w))
  ((pending_weight < 1)) && pending_weight=1
}
# Runs under the step's share; rc 124: out of time. Usage: timed LOG cmd...
timed() {
  local log=$1 && shift
  if ((share_s < 1)); then echo "no time left for this step" > "$log" && return 124; fi
  timeout --kill-after=5 "$share_s" "$@" > "$log" 2>&1
  local rc=$?
  ((rc == 137)) && rc=124
  ((rc == 124)) && echo "run.sh: out of time after its ${share_s}s share" >> "$log"
  return $rc
}

# sluice's binaries need the bundle's libraries; libstdc++/libgcc_s only where the machine's own
# are too old for them; NCCL and cuBLASLt are dlopened by soname, so the CUDA toolkit's folder
# and the Python environment's nvidia/*/lib folders (torch's wheels carry both) come after.
libpath=$here/lib
if LD_LIBRARY_PATH=$libpath ldd "$here"/bin/* "$here"/tests/* 2>&1 |
  grep -qE "(GLIBCXX|CXXABI|GCC)_[0-9.]+' not found|lib(stdc\+\+|gcc_s)[^ ]* => not found"; then
  libpath=$libpath:$here/lib-fallback
fi
libstd_note=$([[ $libpath == *lib-fallback ]] && echo "bundled (the machine's are too old)" ||
  echo "the machine's own")
[[ -d /usr/local/cuda/lib64 ]] && libpath=$libpath:/usr/local/cuda/lib64
pysite=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2> /dev/null)
for d in "$pysite"/nvidia/*/lib; do [[ -d $d ]] && libpath=$libpath:$d; done
sluice_env=(env "LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
export NCCL_SOCKET_IFNAME=lo # the world-of-one run: no network to bootstrap over
export SLUICE_GPU_TEST_DATA=$here/data

step "GPU and driver"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi > "$work/nvidia-smi.txt" 2>&1
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null | head -1)
fi
gpu=${gpu:-none (no nvidia-smi)}
row "GPU, driver, memory" "$gpu"
row "libstdc++/libgcc_s" "$libstd_note"
if ((sim)); then
  dev=sim && auto=sim
  row "mode" "--sim: every cuda/auto run uses --device sim"
else
  dev=cuda && auto=auto
fi
have_gpu=1
[[ $sim == 1 || $gpu == none* ]] && have_gpu=0

step "gpu-labelled tests"
take_share tests
pass=0 failed=0 skipped=0 tests_timed_out=0
tests_started=$SECONDS
while IFS=$'\t' read -r exe filter; do
  log=$work/test-$exe.log
  # Each executable gets what is left of the tests' share.
  saved=$share_s && share_s=$((saved - (SECONDS - tests_started)))
  timed "$log" "${sluice_env[@]}" "$here/tests/$exe" --gtest_filter="$filter"
  rc=$? && share_s=$saved
  p=$(grep -c '^\[       OK \].*ms)$' "$log") s=$(grep -c '^\[  SKIPPED \].*ms)$' "$log")
  f=$(grep -c '^\[  FAILED  \].*ms)$' "$log")
  pass=$((pass + p)) skipped=$((skipped + s)) failed=$((failed + f))
  if ((rc == 124)); then
    tests_timed_out=1
  elif ((rc != 0 && f == 0)); then
    failed=$((failed + 1)) && echo "$exe exited $rc" >> "$log"
  fi
done < "$here/tests/gpu-tests.tsv"
note=$( ((tests_timed_out)) && echo "; out of time after ${share_s}s")
row "gpu tests" "$pass passed, $failed failed, $skipped skipped$note"
failures=$((failures + failed + tests_timed_out))
# Every skip with its reason: gtest prints "file:line: Skipped" then the message, then the
# "[  SKIPPED ]" line; grouped by reason.
for log in "$work"/test-*.log; do
  [[ -f $log ]] || continue
  awk '/: Skipped$/ {getline msg; reason = msg; next}
       /^\[  SKIPPED \] .*ms\)$/ {print (reason == "" ? "(no reason given)" : reason); reason = ""}' "$log"
done | sort | uniq -c | sort -rn | while read -r n reason; do
  row "  skipped ($n)" "$reason"
done

run_train() { # name, weight key, then sluice-train flags
  local name=$1 key=$2 && shift 2
  take_share "$key"
  timed "$work/$name.log" "${sluice_env[@]}" "$here/bin/sluice-train" --data "$here/data" --quiet "$@"
  local rc=$? log=$work/$name.log sps acc wall verdict
  sps=$(grep -oP 'training \(\K[0-9.]+(?= samples/s)' "$log" | tail -1)
  acc=$(grep -oP 'final test accuracy: \K[0-9.]+' "$log" | tail -1)
  wall=$(grep -oP 'samples in \K[0-9.]+(?=s of training)' "$log" | tail -1)
  verdict=$(grep -m1 -oP '^(verdict: )?\K(input-bound|partly-input-bound|compute-bound|launch-bound|cpu-bound)[^;]*' "$log" | head -1)
  if ((rc == 124)); then
    fail && row "$name" "out of time after its ${share_s}s share"
  elif ((rc != 0)); then
    fail && row "$name" "exit $rc: $(tail -1 "$log")"
  elif [[ -z $sps || -z $wall ]]; then
    fail && row "$name" "UNPARSED: no 'samples in Ns of training (N samples/s)' line in $name.log"
  else
    row "$name" "train loop ${wall}s, ${sps} samples/s, test acc ${acc:-n/a}; ${verdict:-}"
  fi
  return $rc
}

step "reference job on the best device"
run_train reference-auto ref_auto --epochs "$epochs" --batch-size 32 --lr 0.01 \
  --device $auto --report-json "$work/reference-report.json" --trace "$work/reference-trace.json"
step "reference job, CPU backend (accuracy parity)"
run_train reference-cpu ref_cpu --epochs "$epochs" --batch-size 32 --lr 0.01 --device cpu
# A python3 that fails here is reported with its own error, not taken for "no torch".
report_rows() { # a report.json and a trace.json -> summary rows; UNPARSED when a field is missing
  python3 - "$@" << 'PYEOF' 2>&1 | tee -a "$summary"
import json, sys
def row(k, v): print(f"{k:<44} {v}")
kind = sys.argv[1]
try:
    r = json.load(open(sys.argv[2]))
    if kind == "reference":
        c = r["ceilings"]
        def fmt(k):
            x = c.get(k) or {}
            return f"{x['mb_per_s'] / 1000:.1f} GB/s" if x.get("measured") else x.get("note", "n/a")
        row("H2D pinned / pageable (batch 32)", f"{fmt('h2d_pinned')} / {fmt('h2d_pageable')}")
        comp = c.get("compute") or {}
        row("compute ceiling (train steps, this model)",
            f"{comp['samples_per_s']:.0f} samples/s" if comp.get("measured") else comp.get("note", "n/a"))
        row("reference job verdict", r["verdict"]["sentence"])
    else:
        j = json.load(open(sys.argv[3]))
        share = j["otherData"]["copy_hidden_share"]
        n = sum(1 for e in j["traceEvents"] if e.get("ph") == "X" and e.get("name") == "h2d")
        row("u8 batch 32: copy time hidden behind compute",
            f"{100 * share:.1f}% of {n} copies" if share >= 0 else f"none measured ({n} h2d spans)")
        c = {s["stage"]: s for s in r["stages"]}["compute"]
        row("u8 batch 32: compute device busy / host enqueue",
            f"{c['busy_pct']:.0f}% / {r['compute_host_pct']:.0f}% of training time; "
            f"verdict {r['verdict']['class']}")
except Exception as e:  # a missing file or field: the step's output could not be parsed
    row(f"{kind} report", f"UNPARSED: {type(e).__name__}: {e}")
    sys.exit(1)
PYEOF
}
step "reference report"
if [[ -f "$work/reference-report.json" ]]; then
  report_rows reference "$work/reference-report.json" || fail
else
  row "reference job verdict" "UNPARSED: no reference-report.json (the run failed, above)" && fail
fi
step "u8 over PCIe at batch 32 (copy hidden behind compute?)"
run_train u8-batch32 u8 --epochs 1 --batch-size 32 --device $auto --h2d-format u8 \
  --report-json "$work/u8-report.json" --trace "$work/u8-trace.json"
if [[ -f "$work/u8-trace.json" && -f "$work/u8-report.json" ]]; then
  report_rows u8 "$work/u8-report.json" "$work/u8-trace.json" || fail
else
  row "u8 batch 32: copy time hidden behind compute" "UNPARSED: no u8 report or trace" && fail
  row "u8 batch 32: compute device busy / host enqueue" "UNPARSED: no u8 report or trace"
fi
step "CUDA Graph"
run_train cuda-graph graph --epochs 1 --batch-size 32 --device $dev --cuda-graph

step "NCCL path, world of 1 (the data-parallel exchange on one GPU)"
if ((!have_gpu && !sim)); then
  take_share nccl && row "NCCL world of 1 vs no exchange" "skipped: NCCL needs a GPU (no GPU here)"
else
  # A sum over one rank changes nothing: the run through the exchange must end bitwise equal to
  # the same run without it. Both sides store the gradient and then step it: the CPU kernels of
  # the sim backend otherwise fuse plain SGD's step into the gradient's sgemm without an
  # exchange, which some OpenBLAS kernels (SkylakeX) round differently (--fused-sgd=false; CUDA
  # always steps from the stored gradient). Two runs share the step's weight.
  weight[nccl]=$((weight[nccl] / 2)) && pending_weight=$((pending_weight + weight[nccl]))
  run_train no-exchange nccl --epochs 1 --batch-size 32 --device $dev --fused-sgd=false \
    --export-safetensors "$work/no-exchange.safetensors"
  run_train exchange-world1 nccl --epochs 1 --batch-size 32 --device $dev --exchange-always \
    --export-safetensors "$work/exchange-world1.safetensors"
  if cmp -s "$work/no-exchange.safetensors" "$work/exchange-world1.safetensors"; then
    row "NCCL world of 1 vs no exchange" "bitwise equal weights ($dev)"
  else
    fail && row "NCCL world of 1 vs no exchange" "weights DIFFER (or a run failed, above)"
  fi
fi
step "larger configuration"
if ((sim)); then
  # The GPU's 784-4096-4096-10 would take minutes on a host core: the same step, smaller.
  run_train large-b1024 large --epochs 1 --batch-size 1024 --layers 784,256,256,10 \
    --device sim --report-json "$work/large-report.json"
elif ((!have_gpu)); then
  take_share large
  row "large-b1024" "skipped: 784-4096-4096-10 is a GPU configuration (no GPU here)"
else
  run_train large-b1024 large --epochs 2 --batch-size 1024 --layers 784,4096,4096,10 \
    --device cuda --report-json "$work/large-report.json"
fi

step "pipeline benchmark"
take_share pipeline
if [[ -x "$here/bin/pipeline_benchmark" ]]; then
  timed "$work/pipeline_benchmark.txt" "${sluice_env[@]}" "$here/bin/pipeline_benchmark" \
    --benchmark_min_time=0.05 --benchmark_out="$work/pipeline_benchmark.json" \
    --benchmark_out_format=json
  rc=$?
  if ((rc == 124)); then
    fail && row "pipeline benchmark" "out of time after its ${share_s}s share"
  else
    ((rc != 0)) && fail
    row "pipeline benchmark" "exit $rc (pipeline_benchmark.txt)"
  fi
else
  row "pipeline benchmark" "skipped: not in the bundle (built with SLUICE_BUILD_BENCHMARKS=OFF)"
fi
step "CUDA kernels, GEMMs, H2D"
take_share bench
no_gpu_why=$( ((sim)) && echo "--sim (no GPU run)" || echo "no GPU here")
if [[ ! -x "$here/bin/sluice-cuda-bench" ]]; then
  row "cuda kernel harness" "skipped: not in the bundle (built without CUDA)"
elif ((!have_gpu)); then
  row "cuda kernel harness" "skipped: $no_gpu_why"
else
  share_s=$((share_s / 2)) # two batch sizes
  timed "$work/cuda-bench-b32.txt" "${sluice_env[@]}" "$here/bin/sluice-cuda-bench" --batch 32
  rc32=$?
  timed "$work/cuda-bench-b1024.txt" "${sluice_env[@]}" "$here/bin/sluice-cuda-bench" --batch 1024
  rc1024=$?
  if ((rc32 == 124 || rc1024 == 124)); then
    fail && row "cuda kernel harness" "out of time after its ${share_s}s share (per batch size)"
  else
    ((rc32 != 0 || rc1024 != 0)) && fail
    row "cuda kernel harness" "exit $rc32 / $rc1024 at batch 32 / 1024 (cuda-bench-b*.txt)"
  fi
fi

# The module built here is for this machine's Python; the GPU image's is another version.
row "sluice Python module on CUDA" "not checked: the bundle has no sluice module (it is built for the build machine's Python; here: $(python3 -V 2>&1))"
step "PyTorch on the same GPU"
take_share pytorch
torch_check=$(python3 -c 'import torch, torchvision; print("cuda" if torch.cuda.is_available() else "no-cuda")' 2>&1 | tail -1)
if ((!have_gpu)); then
  row "PyTorch reference script on the GPU" "skipped: $no_gpu_why (python3's torch: $torch_check)"
elif [[ $torch_check != cuda ]]; then
  row "PyTorch reference script on the GPU" "skipped: python3 cannot use torch on CUDA: $torch_check"
else
  raw=$work/torch-data/FashionMNIST/raw && mkdir -p "$raw"
  "${sluice_env[@]}" "$here/bin/sluice-shard" export "$here/data" --split train --out "$raw/train" > /dev/null
  "${sluice_env[@]}" "$here/bin/sluice-shard" export "$here/data" --split test --out "$raw/t10k" > /dev/null
  timed "$work/pytorch-cuda.json" python3 "$here/bench/pytorch_reference.py" \
    --root "$work/torch-data" --epochs "$epochs" --device cuda
  rc=$?
  if ((rc == 124)); then
    fail && row "PyTorch reference script on the GPU" "out of time after its ${share_s}s share"
  else
    ((rc != 0)) && fail
    row "PyTorch reference script on the GPU" "exit $rc: $(tail -1 "$work/pytorch-cuda.json")"
  fi
fi

row "deadline" "$((SECONDS - started))s used of ${deadline_s}s; $failures failure(s)"
# One archive of every log, trimmed to fit what comes back: logs over 2 MiB keep their first
# and last MiB; traces are dropped, largest first, while the archive is over 15 MiB.
for f in "$work"/*.log "$work"/*.txt; do
  [[ -f $f ]] || continue
  if (($(stat -c %s "$f") > 2097152)); then
    { head -c 1048576 "$f" && echo "
... trimmed ...
" && tail -c 1048576 "$f"; } > "$f.trimmed" && mv "$f.trimmed" "$f"
  fi
done
cp "$summary" "$work/summary.txt"
rm -rf "$work/torch-data" "$work"/*.safetensors
archive=$logs/gpu-check-logs.tar.gz
while :; do
  tar -C "$work" -czf "$archive" .
  (($(stat -c %s "$archive") <= 15 * 1048576)) && break
  biggest=$(ls -S "$work"/*trace*.json 2> /dev/null | head -1)
  [[ -n $biggest ]] || break
  echo "dropped $(basename "$biggest") ($(stat -c %s "$biggest") bytes) to fit" >> "$work/summary.txt"
  rm -f "$biggest"
done
rm -rf "$work"
echo
echo "summary ($summary; every log in $archive):"
cat "$summary"
if ((failures > 0)); then
  echo "gpu-check: $failures failure(s); see $archive" >&2
  exit 1
fi
