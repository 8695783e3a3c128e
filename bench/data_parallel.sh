#!/usr/bin/env bash
# 1 rank against 2 ranks of sluice-train on this machine, CPU and sim backends, with the
# exchange's share of step time (docs/distributed.md, docs/scaling.md). Prints one line per
# configuration: samples/s over all ranks, test accuracy, the exchange's time per step, its
# share of training time, the measured all-reduce ceiling and the verdict.
#   bash bench/data_parallel.sh [--build DIR] [--data DIR] [--epochs N] [--repeats R]
# --data: a sharded dataset (default: Fashion-MNIST sharded into out/dataset by quickstart, or
# sharded here into a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build; data=""; epochs=3; repeats=1
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
train=$build/tools/sluice-train
[[ -x $train ]] || { echo "build first: $train is missing" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [[ -z $data ]]; then
  if [[ -f out/dataset/train.manifest.json ]]; then
    data=out/dataset
  else
    fm=/usr/share/datasets/fashion-mnist
    data=$tmp/fm
    for s in train t10k; do
      split=$([[ $s == train ]] && echo train || echo test)
      "$build/tools/sluice-shard" create --images $fm/$s-images-idx3-ubyte.gz \
        --labels $fm/$s-labels-idx1-ubyte.gz --out "$data" --split $split --quiet > /dev/null
    done
  fi
fi
# As root in a container: Open MPI needs these (docs/distributed.md).
mpirun=(mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none)
echo "data-parallel sluice-train on $(nproc) cores, $data, $epochs epochs, $(date -u +%F)"
printf '%-8s %5s %6s %7s | %12s %8s | %10s %9s %12s  %s\n' device batch ranks repeat \
  "samples/s" "test acc" "exch us/st" "exch %" "ceiling GB/s" verdict
for device in cpu sim; do
  for batch in 32 256; do
    for ranks in 1 2; do
      for ((r = 1; r <= repeats; ++r)); do
        json=$tmp/report-$device-$batch-$ranks-$r.json
        log=$tmp/log-$device-$batch-$ranks-$r.txt
        extra=()
        [[ $device == sim ]] && extra=(--sim-compute-samples-per-s=400000)
        "${mpirun[@]}" -np "$ranks" "$train" --data "$data" --device "$device" \
          --batch-size "$batch" --epochs "$epochs" --quiet --ceilings=false \
          --report-json "$json" "${extra[@]}" > "$log" 2>&1 || { echo "failed:"; tail -5 "$log"; exit 1; }
        /usr/bin/python3 - "$json" "$log" "$device" "$batch" "$ranks" "$r" <<'PY'
import json, re, sys
report = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
m = re.search(r"\(([0-9]+) samples/s over all ranks\)", log) or re.search(r"training \(([0-9]+) samples/s\)", log)
acc = re.search(r"final test accuracy: ([0-9.]+)", log)
ex = report.get("exchange") or {}
per_step = ex.get("time_per_step_us")
count = ex.get("count_time_per_step_us") or 0
pct = ex.get("train_pct")
ceil = (ex.get("ceiling") or {}).get("gb_per_s")
verdict = report.get("verdict", {})
vclass = verdict.get("class", "?") if isinstance(verdict, dict) else str(verdict)
print(f"{sys.argv[3]:<8} {sys.argv[4]:>5} {sys.argv[5]:>6} {sys.argv[6]:>7} | "
      f"{(m.group(1) if m else '?'):>12} {(acc.group(1) if acc else '?'):>8} | "
      f"{(f'{per_step + count:.0f}' if per_step is not None else '-'):>10} "
      f"{(f'{pct:.1f}' if pct is not None else '-'):>9} "
      f"{(f'{ceil:.2f}' if ceil else '-'):>12}  {vclass}")
PY
      done
    done
  done
done
