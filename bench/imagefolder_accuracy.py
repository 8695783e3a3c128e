"""Validation accuracy of python/examples/imagefolder_cnn.py through sluice.Loader against the
same script on torchvision's ImageFolder + DataLoader (issue 37's goal: within 1 point,
averaged over 3 seeds).

The data: Fashion-MNIST (Debian's dataset-fashion-mnist IDX files, or --idx DIR) written as
JPEGs (PIL, quality 90, greyscale) in class folders, ROOT/train/<class>/ from the first
--train-images training images and ROOT/val/<class>/ from the first --val-images test images,
then sharded with `sluice-shard create --image-folder` (train and val splits). Each seed runs
the example twice, once per loader, each in its own process, with the same arguments (--size 28:
RandomResizedCrop(28) + flip to train, Resize(32) + CenterCrop(28) to validate; --amp as
given). Printed: each run's final validation accuracy and wall time, the means, and the mean
difference sluice - torchvision in points.

  /usr/bin/python3 bench/imagefolder_accuracy.py --build build [--seeds 0,1,2] [--epochs 4]
"""
import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle_boot"]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[2] != 8:
        raise SystemExit("%s: not an IDX file of u8" % path)
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def write_folder(root, images, labels):
    from PIL import Image
    for name in CLASSES:
        os.makedirs(os.path.join(root, name), exist_ok=True)
    for i, (image, label) in enumerate(zip(images, labels)):
        Image.fromarray(image).save(os.path.join(root, CLASSES[label], "%05d.jpg" % i),
                                    quality=90)


def run(example, args, loader, data, seed, env):
    cmd = [sys.executable, example, data, "--loader", loader, "--size", "28",
           "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--seed", str(seed),
           "--lr", str(args.lr), "--log-every", "1000000"] + (["--amp"] if args.amp else [])
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit("%s failed (exit %d):\n%s" % (" ".join(cmd), done.returncode,
                                                      done.stderr[-3000:]))
    accuracies = re.findall(r"val accuracy ([\d.]+)", done.stdout)
    return float(accuracies[-1]), seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train-images", type=int, default=12000)
    p.add_argument("--val-images", type=int, default=2000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--amp", action="store_true")
    p.add_argument("--workdir", default=None, help="keep the folder and dataset here")
    args = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    example = os.path.join(here, "..", "python", "examples", "imagefolder_cnn.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
    shard = os.path.join(args.build, "tools", "sluice-shard")
    work = args.workdir or tempfile.mkdtemp(prefix="imagefolder_accuracy_")
    root, data = os.path.join(work, "fashion-jpeg"), os.path.join(work, "dataset")
    if not os.path.isdir(root):
        for split, prefix, n in (("train", "train", args.train_images),
                                 ("val", "t10k", args.val_images)):
            images = read_idx(os.path.join(args.idx, prefix + "-images-idx3-ubyte.gz"))[:n]
            labels = read_idx(os.path.join(args.idx, prefix + "-labels-idx1-ubyte.gz"))[:n]
            write_folder(os.path.join(root, split), images, labels)
        for split in ("train", "val"):
            subprocess.run([shard, "create", "--image-folder", os.path.join(root, split),
                            "--out", data, "--split", split, "--quiet"], check=True)
    print("Fashion-MNIST as JPEG folders: %d train, %d val images; %d epochs, batch %d, lr %g%s"
          % (args.train_images, args.val_images, args.epochs, args.batch_size, args.lr,
             ", --amp" if args.amp else ""))
    print("%-6s %-12s %10s %9s" % ("seed", "loader", "val acc", "seconds"))
    results = {"sluice": [], "torchvision": []}
    for seed in (int(s) for s in args.seeds.split(",")):
        for loader, path in (("sluice", data), ("torchvision", root)):
            accuracy, seconds = run(example, args, loader, path, seed, env)
            results[loader].append(accuracy)
            print("%-6d %-12s %10.4f %9.1f" % (seed, loader, accuracy, seconds), flush=True)
    means = {k: statistics.mean(v) for k, v in results.items()}
    print("mean val accuracy: sluice %.4f, torchvision %.4f; difference %+.2f points"
          % (means["sluice"], means["torchvision"],
             100 * (means["sluice"] - means["torchvision"])))


if __name__ == "__main__":
    main()
