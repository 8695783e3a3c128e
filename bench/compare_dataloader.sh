#!/usr/bin/env bash
# Data loading only, side by side: PyTorch's DataLoader (Debian's python3-torch and
# python3-torchvision; FashionMNIST train split, ToTensor, batch 32, no shuffle, workers 0 and 2,
# one epoch iterated) against sluice's pipeline on the same files with the same configuration
# (f32 = ToTensor, batch 32, no shuffle, one epoch per iteration; bench/pipeline_benchmark's
# BM_Pipeline_DataLoaderConfig). Rounds alternate the three runs; medians of --repeats rounds.
# Beside the DataLoader ratio it prints sluice's share of its decode limit (the benchmark's
# of_decode_limit: samples/s / (one thread's zstd decode ceiling, same run, x threads)).
#
#   bench/compare_dataloader.sh [--build DIR] [--data DIR] [--repeats N] [--threads N]
#
# sluice reads shards it writes from the IDX files at start (not timed); PyTorch reads the IDX
# files it loads at construction (not timed either: only the epoch is).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build
DATA=/usr/share/datasets/fashion-mnist
REPEATS=3
THREADS=2
PY=/usr/bin/python3  # Debian's python3-torch / python3-torchvision
while (($#)); do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "compare_dataloader.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
BENCH=$BUILD/bench/pipeline_benchmark
[[ -x $BENCH ]] || { echo "compare_dataloader.sh: build $BENCH first" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/FashionMNIST/raw"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  ln -s "$(readlink -f "$DATA/$f.gz")" "$tmp/FashionMNIST/raw/$f.gz"
  gunzip -c "$DATA/$f.gz" > "$tmp/FashionMNIST/raw/$f"
done

cat > "$tmp/loader.py" <<'PY'
import sys, time
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
root, workers = sys.argv[1], int(sys.argv[2])
ds = datasets.FashionMNIST(root=root, train=True, download=False, transform=transforms.ToTensor())
loader = DataLoader(ds, batch_size=32, num_workers=workers)
n = 0
t0 = time.perf_counter()
for x, y in loader:
    n += x.shape[0]
dt = time.perf_counter() - t0
print(f"{n / dt:.1f}")
PY

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
: > "$tmp/w0"; : > "$tmp/w2"; : > "$tmp/sl"; : > "$tmp/dl"
for ((r = 1; r <= REPEATS; r++)); do
  "$PY" "$tmp/loader.py" "$tmp" 0 >> "$tmp/w0"
  "$PY" "$tmp/loader.py" "$tmp" 2 >> "$tmp/w2"
  "$BENCH" --benchmark_filter="BM_Pipeline_DataLoaderConfig/threads:$THREADS/" \
    --benchmark_min_time=2 --benchmark_format=json 2>/dev/null > "$tmp/sl.json"
  "$PY" -c 'import json,sys; b=json.load(open(sys.argv[1]))["benchmarks"][0]; print(b["items_per_second"], file=open(sys.argv[2], "a")); print(b["of_decode_limit"], file=open(sys.argv[3], "a"))' \
    "$tmp/sl.json" "$tmp/sl" "$tmp/dl"
  echo "round $r: torch w0 $(tail -1 "$tmp/w0")  torch w2 $(tail -1 "$tmp/w2")  sluice $(tail -1 "$tmp/sl") samples/s ($(awk '{printf "%.0f%%", 100 * $1}' <<< "$(tail -1 "$tmp/dl")") of its decode limit)"
done
w0=$(median < "$tmp/w0"); w2=$(median < "$tmp/w2"); sl=$(median < "$tmp/sl"); dl=$(median < "$tmp/dl")
best=$(printf '%s\n%s\n' "$w0" "$w2" | sort -g | tail -1)
printf 'PyTorch DataLoader, workers 0: %12.0f samples/s (median of %d)\n' "$w0" "$REPEATS"
printf 'PyTorch DataLoader, workers 2: %12.0f samples/s\n' "$w2"
printf 'sluice pipeline, %d threads:    %12.0f samples/s\n' "$THREADS" "$sl"
awk -v s="$sl" -v b="$best" -v d="$dl" \
  'BEGIN {printf "ratio sluice / best DataLoader: %.1fx    sluice / its decode limit: %.0f%%\n", s / b, 100 * d}'
