#!/usr/bin/env bash
# Runs the reference PyTorch job (Debian's python3-torch, CPU) and sluice-train with the same
# configuration (Fashion-MNIST, 784-128-10, SGD lr 0.01, batch 32, no shuffle, 10 epochs), side
# by side in one run, alternating, and prints wall time, samples/s and test accuracy for both,
# with the ratio. Medians of --repeats runs (timings on shared machines vary by up to 30%).
#
#   bench/compare_pytorch.sh [--build DIR] [--data DIR] [--epochs N] [--repeats N]
#
# sluice trains from shards made with sluice-shard (the sharding is not timed: it is done once);
# its wall time includes reading the shards, the pipeline and evaluation. PyTorch's includes
# reading the IDX files, as the script as written does.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
DATA=/usr/share/datasets/fashion-mnist
EPOCHS=10
REPEATS=3
PY=/usr/bin/python3
while (($#)); do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    *) echo "compare_pytorch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for bin in sluice-shard sluice-train; do
  [[ -x "$BUILD/tools/$bin" ]] || { echo "compare_pytorch.sh: build $BUILD/tools/$bin first" >&2; exit 2; }
done
"$PY" -c 'import torch, torchvision' 2>/dev/null || { echo "compare_pytorch.sh: $PY lacks torch/torchvision (apt-get install python3-torch python3-torchvision)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/FashionMNIST/raw"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [[ -f "$DATA/$f.gz" ]]; then gunzip -c "$DATA/$f.gz" > "$work/root/FashionMNIST/raw/$f"; else cp "$DATA/$f" "$work/root/FashionMNIST/raw/$f"; fi
done
raw=$work/root/FashionMNIST/raw
"$BUILD/tools/sluice-shard" create --quiet --images "$raw/train-images-idx3-ubyte" --labels "$raw/train-labels-idx1-ubyte" --out "$work/shards" --split train >/dev/null
"$BUILD/tools/sluice-shard" create --quiet --images "$raw/t10k-images-idx3-ubyte" --labels "$raw/t10k-labels-idx1-ubyte" --out "$work/shards" --split test >/dev/null

run_sluice() {
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$("$BUILD/tools/sluice-train" --data "$work/shards" --device cpu --epochs "$EPOCHS" --quiet)
  t1=$(date +%s.%N)
  local sps acc
  sps=$(grep -oP 'training \(\K[0-9.]+(?= samples/s)' <<<"$out")
  acc=$(grep -oP 'final test accuracy: \K[0-9.]+' <<<"$out")
  echo "{\"variant\": \"sluice\", \"samples_per_second\": $sps, \"wall_seconds\": $(echo "$t1 - $t0" | bc), \"test_accuracy\": $acc}"
}
run_torch() { "$PY" bench/pytorch_reference.py --root "$work/root" --epochs "$EPOCHS" --variant "$1" --threads 1; }

: > "$work/results.jsonl"
for ((i = 1; i <= REPEATS; i++)); do
  echo "round $i/$REPEATS ..." >&2
  run_sluice >> "$work/results.jsonl"
  run_torch dataloader >> "$work/results.jsonl"
  run_torch preloaded >> "$work/results.jsonl"
done
"$PY" - "$work/results.jsonl" "$EPOCHS" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["variant"], []).append(r)
med = {k: {f: statistics.median(x[f] for x in v) for f in ("samples_per_second", "wall_seconds", "test_accuracy")} for k, v in by.items()}
print(f"Fashion-MNIST, 784-128-10, SGD lr 0.01, batch 32, no shuffle, {sys.argv[2]} epochs, CPU; medians of {len(by['sluice'])} alternating runs")
print(f"{'run':<36}{'wall s':>9}{'samples/s':>12}{'test acc':>10}{'sluice speedup':>16}")
names = {"sluice": "sluice-train (shards, pipeline)", "dataloader": "PyTorch as written (DataLoader)", "preloaded": "PyTorch preloaded tensor"}
for k in ("sluice", "dataloader", "preloaded"):
    m = med[k]
    ratio = med["sluice"]["samples_per_second"] / m["samples_per_second"]
    print(f"{names[k]:<36}{m['wall_seconds']:>9.2f}{m['samples_per_second']:>12.0f}{m['test_accuracy']:>10.4f}{ratio:>15.2f}x")
PYEOF
