#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, shard Fashion-MNIST
# (train and test), verify every checksum, then train the reference job (784-128-10 MLP,
# SGD lr 0.01, batch 32, 10 epochs) on the best available device and print the results with
# the bottleneck report.
#   DATA=<dir with IDX files>  use other IDX files (e.g. real MNIST); default Fashion-MNIST.
#   OUT=<dir>                  where the shard dataset and run outputs go; default ./out.
#   Extra arguments are passed to sluice-train (e.g. --device=cpu --epochs=1).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
OUT=${OUT:-out}
bash scripts/install-deps.sh
cmake --preset release >/dev/null
# Only what the main job runs: the two tools and the Python package (build/python). The test
# command (scripts/test.sh) builds the rest: tests, benchmarks, sanitizer and fuzz builds.
targets=(sluice-shard sluice-train)
if ninja -C build -t targets all 2>/dev/null | grep -q '^_sluice:'; then targets+=(_sluice); fi
cmake --build --preset release -j "$(nproc)" --target "${targets[@]}"
bin=build/tools

find_idx() {  # first existing of NAME.gz / NAME (also the t10k-... naming of MNIST)
  for f in "$DATA/$1.gz" "$DATA/$1" "$DATA/${1//-idx/.idx}"; do
    [[ -f "$f" ]] && { echo "$f"; return; }
  done
  echo "quickstart: no $1 under $DATA" >&2; exit 1
}
"$bin/sluice-shard" create --images "$(find_idx train-images-idx3-ubyte)" \
  --labels "$(find_idx train-labels-idx1-ubyte)" --out "$OUT/dataset" --split train
"$bin/sluice-shard" create --images "$(find_idx t10k-images-idx3-ubyte)" \
  --labels "$(find_idx t10k-labels-idx1-ubyte)" --out "$OUT/dataset" --split test
"$bin/sluice-shard" verify "$OUT/dataset"
if [[ -x "$bin/sluice-train" ]]; then
  "$bin/sluice-train" --data "$OUT/dataset" --report-json "$OUT/report.json" \
    --metrics-out "$OUT/metrics.jsonl" --export-safetensors "$OUT/model.safetensors" "$@"
fi
