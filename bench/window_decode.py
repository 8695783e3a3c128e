"""Decoding only the crop's window of each JPEG against decoding it whole (issue 36), in one run.

    PYTHONPATH=build/python /usr/bin/python3 bench/window_decode.py \
        [--images 2000] [--min-side 375] [--max-side 500] [--folder DIR | --real-photos] \
        [--rounds 3] [--batch-size 256] [--threads N] [--workers 2] \
        [--sluice-shard build/tools/sluice-shard]

Data: --images photo-like JPEGs (bench/photo_folder.py) of --min-side to --max-side px per
side, quality 90, 4:2:0 (ImageNet-like at the defaults: about 500x375); with --real-photos,
--images real photographs cut from Debian's plasma-workspace-wallpapers
(bench/real_photo_folder.py says how; install that package first); or an ImageFolder of your
own (--folder). Ingested with `sluice-shard create --image-folder`.

For each chain below, it runs sluice.Loader over the dataset in a child process twice per
round, once as it is (the crop's window decoded) and once with SLUICE_WINDOW_DECODE=0 (every
JPEG decoded whole), in turn, and prints the median rate of each (samples over the wall clock
of an epoch, its first epoch a warm-up not counted), their ratio, and the decode row's bytes
decoded against bytes stored. Beside them, the bare whole-decode rate of the same files on
the usable cores (one thread's tjDecompress2 rate times the cores, as
bench/images_vs_decode_limit.py measures it):
- CenterCrop(64), uint8 batches;
- RandomResizedCrop(224) + flip, uint8 batches;
- Resize(256), CenterCrop(224) (the evaluation transform), uint8 batches;
- RandomResizedCrop(224) + flip + Normalize, float32 batches.
The output is the same bits either way (tests/pipeline/transforms/fused_chain_test.cc); only
the time differs.

Then, for CenterCrop(64) to uint8, the same rounds of torchvision's ImageFolder (transform
CenterCrop(64), PILToTensor()) in DataLoader(num_workers=--workers, persistent_workers=True,
shuffle=True), and PIL's bare whole decode (Image.open(f).convert("RGB")) of every file in
--workers processes; and RandomResizedCrop(112) + flip to uint8 exact (the window) against
DecodeImage(draft=True) (PIL's reduced-size decode, docs/transforms.md), in turn.
Run it on an idle machine: every side shares the cores with nothing else.
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
import real_photo_folder  # noqa: E402

CHAINS = {
    "CenterCrop(64), u8": ("[T.DecodeImage(), T.CenterCrop(64)]", "uint8"),
    "RandomResizedCrop(224) + flip, u8": (
        "[T.DecodeImage(), T.RandomResizedCrop(224), T.RandomHorizontalFlip()]", "uint8"),
    "Resize(256), CenterCrop(224), u8": ("[T.DecodeImage(), T.Resize(256), T.CenterCrop(224)]",
                                         "uint8"),
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


DRAFT_CHAINS = {
    "exact (the window)": "[T.DecodeImage(), T.RandomResizedCrop(112), T.RandomHorizontalFlip()]",
    "DecodeImage(draft=True)": "[T.DecodeImage(draft=True), T.RandomResizedCrop(112), "
                               "T.RandomHorizontalFlip()]",
}

# torchvision's ImageFolder + DataLoader for CenterCrop(64) to uint8 (the median epoch rate
# after a warm-up epoch), and PIL's bare whole decode of the files in `workers` processes.
DATALOADER_CHILD = r"""
import json, sys, time
import torch, torchvision
import torchvision.transforms as TT
folder, batch, workers, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = torchvision.datasets.ImageFolder(folder, transform=TT.Compose([TT.CenterCrop(64),
                                                                      TT.PILToTensor()]))
loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                     persistent_workers=True)
rates = []
for _ in range(epochs):
    n, start = 0, time.perf_counter()
    for x, _ in loader:
        n += x.shape[0]
    rates.append(n / (time.perf_counter() - start))
print(json.dumps({"rate": sorted(rates[1:])[len(rates[1:]) // 2]}))
"""

PIL_CHILD = r"""
import json, multiprocessing, sys, time
from PIL import Image
def decode(paths):
    for p in paths:
        with Image.open(p) as im:
            im.convert("RGB")
    return len(paths)
if __name__ == "__main__":
    paths, workers = json.load(open(sys.argv[1])), int(sys.argv[2])
    with multiprocessing.Pool(workers) as pool:
        pool.map(decode, [paths[i::workers] for i in range(workers)])  # warm-up: page cache
        start = time.perf_counter()
        n = sum(pool.map(decode, [paths[i::workers] for i in range(workers)]))
        print(json.dumps({"rate": n / (time.perf_counter() - start)}))
"""


def run_python(code, argv, env=None):
    done = subprocess.run([sys.executable, "-c", code] + argv, env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit("a benchmark child failed: %s" % done.stderr.strip()[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_child(args, dataset, chain, dtype, window):
    env = dict(os.environ)
    env["SLUICE_WINDOW_DECODE"] = "1" if window else "0"
    return run_python(CHILD, [dataset, chain, dtype, str(args.batch_size), str(args.threads or 0),
                              str(args.epochs)], env)


def rates_text(runs):
    return ", ".join("%.0f" % r["rate"] for r in runs)


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
    p.add_argument("--real-photos", action="store_true",
                   help="real photographs cut from plasma-workspace-wallpapers' (instead of the "
                        "generated photo-like images)")
    p.add_argument("--workers", type=int, default=2,
                   help="DataLoader workers, and processes of PIL's bare decode")
    args = p.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="sluice-window-decode-")
    folder = args.folder or os.path.join(work, "photos")
    if not args.folder and not os.path.isdir(folder):
        write = (real_photo_folder.write_real_photo_folder if args.real_photos
                 else photo_folder.write_photo_folder)
        write(folder, args.images, args.classes, args.seed, args.min_side, args.max_side)
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
              % (name, w, rates_text(window), f, rates_text(whole), w / f, 100 * share, cores,
                 w / (one * cores)))
        if name.startswith("CenterCrop"):
            theirs, pil = [], []
            listing = os.path.join(work, "files.json")
            with open(listing, "w") as out:
                json.dump(paths, out)
            for _ in range(args.rounds):
                theirs.append(run_python(DATALOADER_CHILD, [folder, str(args.batch_size),
                                                            str(args.workers), str(args.epochs)]))
                pil.append(run_python(PIL_CHILD, [listing, str(args.workers)]))
            d = statistics.median(r["rate"] for r in theirs)
            b = statistics.median(r["rate"] for r in pil)
            print("  against ImageFolder + DataLoader(num_workers=%d), CenterCrop(64), "
                  "PILToTensor: %.0f samples/s (%s): sluice %.2fx; against PIL's bare whole "
                  "decode in %d processes: %.0f images/s (%s): sluice %.2fx"
                  % (args.workers, d, rates_text(theirs), w / d, args.workers, b,
                     rates_text(pil), w / b))

    runs = {name: [] for name in DRAFT_CHAINS}
    for _ in range(args.rounds):
        for name, chain in DRAFT_CHAINS.items():
            runs[name].append(run_child(args, dataset, chain, "uint8", True))
    exact, draft = (statistics.median(r["rate"] for r in runs[n]) for n in DRAFT_CHAINS)
    names = list(DRAFT_CHAINS)
    print("RandomResizedCrop(112) + flip, u8: %s %.0f samples/s (%s), %s %.0f (%s): %.2fx; "
          "decoded %.0f%% and %.0f%% of the stored bytes"
          % (names[0], exact, rates_text(runs[names[0]]), names[1], draft,
             rates_text(runs[names[1]]), draft / exact,
             100 * runs[names[0]][0]["decoded"] / max(1, runs[names[0]][0]["stored"]),
             100 * runs[names[1]][0]["decoded"] / max(1, runs[names[1]][0]["stored"])))


if __name__ == "__main__":
    main()
