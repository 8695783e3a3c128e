"""Decoding only the crop's window of each JPEG against decoding it whole (issue 36), in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/window_decode.py \
        [--images 2000] [--min-side 375] [--max-side 500] [--folder DIR] [--rounds 3] \
        [--batch-size 256] [--threads N] [--sluice-shard build/tools/sluice-shard]

Data: --images photo-like JPEGs (bench/photo_folder.py) of --min-side to --max-side px per
side, quality 90, 4:2:0 (ImageNet-like at the defaults: about 500x375), or an ImageFolder of
your own (--folder), ingested with `sluice-shard create --image-folder`.

For each chain below, it runs sluice.Loader over the dataset in a child process twice per
round, once as it is (the crop's window decoded) and once with SLUICE_WINDOW_DECODE=0 (every
JPEG decoded whole), in turn, and prints the median rate of each (samples over the wall clock
of an epoch, its first epoch a warm-up not counted), their ratio, and the decode row's bytes
decoded against bytes stored. Beside them, the bare whole-decode rate of the same files on
the usable cores (one thread's tjDecompress2 rate times the cores, as
bench/images_vs_decode_limit.py measures it):
- CenterCrop(64), uint8 batches;
- RandomResizedCrop(224) + flip, uint8 batches;
- RandomResizedCrop(224) + flip + Normalize, float32 batches.
The output is the same bits either way (tests/pipeline/transforms/fused_chain_test.cc); only
the time differs. Run it on an idle machine: both sides share the cores with nothing else.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photo_folder  # noqa: E402

CHAINS = {
    "CenterCrop(64), u8": ("[T.DecodeImage(), T.CenterCrop(64)]", "uint8"),
    "RandomResizedCrop(224) + flip, u8": (
        "[T.DecodeImage(), T.RandomResizedCrop(224), T.RandomHorizontalFlip()]", "uint8"),
    "RandomResizedCrop(224) + flip + Normalize, f32": (
        "[T.DecodeImage(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), "
        "T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])]", "float32"),
}

CHILD = r"""
import json, sys, time
import torch, sluice
import sluice.transforms as T
data, chain, dtype, batch, threads, epochs = sys.argv[1:7]
loader = sluice.Loader(data, batch_size=int(batch), shuffle=True, dtype=getattr(torch, dtype),
                       threads=int(threads) or None, transforms=eval(chain))
rates = []
for _ in range(int(epochs)):
    n, start = 0, time.perf_counter()
    for x, _ in loader:
        n += x.shape[0]
    rates.append(n / (time.perf_counter() - start))
rows = {s["stage"]: s for s in loader.report()["stages"]}
print(json.dumps({"rate": sorted(rates[1:])[len(rates[1:]) // 2],
                  "decoded": rows["decode"]["bytes"], "stored": rows["decode"]["stored_bytes"]}))
"""


def run_child(args, dataset, chain, dtype, window):
    env = dict(os.environ)
    env["SLUICE_WINDOW_DECODE"] = "1" if window else "0"
    done = subprocess.run([sys.executable, "-c", CHILD, dataset, chain, dtype,
                           str(args.batch_size), str(args.threads or 0), str(args.epochs)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("the loader failed: %s" % done.stderr.strip()[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    photo_folder.add_arguments(p)
    p.add_argument("--min-side", type=int, default=375)
    p.add_argument("--max-side", type=int, default=500)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3, help="epochs per child (the first a warm-up)")
    p.add_argument("--min-decode-seconds", type=float, default=2.0)
    p.add_argument("--workdir", default=None, help="keep the folder and dataset here")
    args = p.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="sluice-window-decode-")
    folder = args.folder or os.path.join(work, "photos")
    if not args.folder and not os.path.isdir(folder):
        photo_folder.write_photo_folder(folder, args.images, args.classes, args.seed,
                                        args.min_side, args.max_side)
    dataset = os.path.join(work, "dataset")
    if not os.path.isdir(dataset):
        photo_folder.ingest(args.sluice_shard, folder, dataset)
    paths = photo_folder.folder_files(folder)
    print("photos:", photo_folder.describe(paths))

    import images_vs_decode_limit as limit  # the bare decode, through ctypes
    files = [(path, open(path, "rb").read()) for path in paths]
    decoder = limit.BareTurboJpeg(4096 * 4096)
    limit.check_against_pil(decoder, files[0])
    cores = args.threads or len(os.sched_getaffinity(0))
    one, _ = limit.bare_decode_rate(decoder, files, args.min_decode_seconds)
    decoder.close()
    print("bare whole decode: %.0f images/s on one core, x %d cores = %.0f images/s"
          % (one, cores, one * cores))

    for name, (chain, dtype) in CHAINS.items():
        window, whole = [], []
        for _ in range(args.rounds):
            window.append(run_child(args, dataset, chain, dtype, True))
            whole.append(run_child(args, dataset, chain, dtype, False))
        w = statistics.median(r["rate"] for r in window)
        f = statistics.median(r["rate"] for r in whole)
        share = window[0]["decoded"] / max(1, window[0]["stored"])
        print("%s: window %.0f samples/s (%s), whole %.0f (%s): %.2fx; %.0f%% of the stored "
              "bytes decoded; window against the bare whole decode on %d cores: %.2fx"
              % (name, w, ", ".join("%.0f" % r["rate"] for r in window), f,
                 ", ".join("%.0f" % r["rate"] for r in whole), w / f, 100 * share, cores,
                 w / (one * cores)))


if __name__ == "__main__":
    main()
