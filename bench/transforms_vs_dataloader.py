"""The CIFAR-style augmentation chain in sluice's pipeline against DataLoader with the same
torchvision transforms, side by side in one process (issue 22's preprocess benchmark).

    PYTHONPATH=build/python /usr/bin/python3 bench/transforms_vs_dataloader.py \
        [--records 20000] [--batch-size 256] [--threads 2] [--workers 2] [--rounds 3] [--jitter]

Data: a 3x32x32 uint8 dataset of --records images (Fashion-MNIST padded to 32x32, three
differently scaled channels; random bytes when the IDX files are missing), written once with
sluice.write_dataset into a temporary directory and kept in memory for DataLoader.

Three loaders, each built once and iterated epoch after epoch as a training loop does (one
warm-up epoch each first, DataLoader's first, not counted: pipelines, buffers and worker
processes starting):
- sluice: sluice.Loader(shuffle=True, dtype=float32, threads=--threads,
  transforms=RandomCrop(32, padding=4), RandomHorizontalFlip(), Normalize(mean, std)), an empty
  loop body;
- sluice, plain normalize: the same with transforms=Normalize(mean, std) only;
- DataLoader: torch.utils.data.DataLoader(shuffle=True, num_workers=--workers,
  persistent_workers=True, batch_size) over a Dataset that applies torchvision's
  RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std) to a PIL
  image (the torchvision CIFAR10 recipe).
With --jitter, both chains gain ColorJitter(0.4, 0.4, 0.4) after the flip (issue 38's CIFAR
recipe, goal >= 20x): on the PIL image in torchvision's, and sluice is given torchvision's own
Compose, whose ColorJitter before ToTensor becomes sluice's with PIL's arithmetic (pil=True).
Each round runs one epoch of each, in turn.
Rates are samples/s of the wall clock of each epoch; medians over rounds. The chain's cost per
sample is the preprocess stage's busy time per sample from each sluice run's own report
(`stages[].cpu_ns_per_sample` of preprocess), so the full chain and plain normalize are compared on the
same timing the report shows.
"""
import argparse
import gzip
import os
import statistics
import tempfile
import time

import numpy as np
import torch

import sluice
from sluice import transforms as T

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
FASHION = os.environ.get("SLUICE_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")


def make_images(records):
    path = os.path.join(FASHION, "train-images-idx3-ubyte.gz")
    if os.path.exists(path):
        with gzip.open(path, "rb") as f:
            raw = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28)
        raw = np.resize(raw, (records, 28, 28))
        padded = np.pad(raw, ((0, 0), (2, 2), (2, 2)))
        images = np.stack([padded, padded // 2, 255 - padded], axis=1)
    else:
        images = np.random.default_rng(0).integers(0, 256, (records, 3, 32, 32), dtype=np.uint8)
    labels = np.arange(records, dtype=np.int64) % 10
    return np.ascontiguousarray(images), labels


class TorchvisionDataset(torch.utils.data.Dataset):
    def __init__(self, images_nhwc, labels, transform):
        self.images, self.labels, self.transform = images_nhwc, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        from PIL import Image
        return self.transform(Image.fromarray(self.images[i])), int(self.labels[i])


def sluice_epoch(loader):
    samples, start = 0, time.perf_counter()
    for images, _ in loader:
        samples += images.shape[0]
    seconds = time.perf_counter() - start
    stages = {s["stage"]: s for s in loader.report()["stages"]}
    return samples / seconds, stages["preprocess"]["cpu_ns_per_sample"]


def dataloader_epoch(loader):
    samples, start = 0, time.perf_counter()
    for images, _ in loader:
        samples += images.shape[0]
    return samples / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=20000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jitter", action="store_true",
                   help="add ColorJitter(0.4, 0.4, 0.4) after the flip on both sides")
    args = p.parse_args()
    import torchvision.transforms as TV
    images, labels = make_images(args.records)
    jitter = [TV.ColorJitter(0.4, 0.4, 0.4)] if args.jitter else []
    recipe = TV.Compose([TV.RandomCrop(32, padding=4), TV.RandomHorizontalFlip()] + jitter +
                        [TV.ToTensor(), TV.Normalize(MEAN, STD)])
    chain = recipe if args.jitter else [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                                        T.Normalize(MEAN, STD)]
    plain = [T.Normalize(MEAN, STD)]
    with tempfile.TemporaryDirectory() as d:
        sluice.write_dataset(d, "train", images, labels, layout="NCHW", num_classes=10)
        dataset = TorchvisionDataset(np.ascontiguousarray(images.transpose(0, 2, 3, 1)), labels,
                                     recipe)
        # Each loader is built once and iterated epoch after epoch, as a training loop does;
        # the first epoch of each (pipelines and buffers, worker processes starting) is a
        # warm-up, not counted.
        full = sluice.Loader(d, args.batch_size, shuffle=True, threads=args.threads,
                             transforms=chain)
        normalize_only = sluice.Loader(d, args.batch_size, shuffle=True, threads=args.threads,
                                       transforms=plain)
        torch_loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size,
                                                   shuffle=True, num_workers=args.workers,
                                                   persistent_workers=args.workers > 0)
        # DataLoader first: its persistent workers are fork()ed then, and a fork makes every
        # page of this process copy-on-write, so sluice's buffers touched before it would each
        # fault again on their next write (measured: the first sluice round after the fork ran
        # at 10 k samples/s, the next at 150-300 k).
        for warm_up in (lambda: dataloader_epoch(torch_loader), lambda: sluice_epoch(full),
                        lambda: sluice_epoch(normalize_only)):
            warm_up()
        rows = []
        for r in range(args.rounds):
            full_rate, full_ns = sluice_epoch(full)
            plain_rate, plain_ns = sluice_epoch(normalize_only)
            dl_rate = dataloader_epoch(torch_loader)
            rows.append((full_rate, full_ns, plain_rate, plain_ns, dl_rate))
            print("round %d: sluice chain %.0f samples/s (preprocess %.0f ns/sample), plain "
                  "normalize %.0f samples/s (%.0f ns/sample), DataLoader %.0f samples/s"
                  % ((r,) + rows[-1]), flush=True)
    med = [statistics.median(col) for col in zip(*rows)]
    print("medians: sluice chain %.0f samples/s, DataLoader (%d workers) %.0f samples/s: %.1fx; "
          "chain %.0f ns/sample against plain normalize %.0f ns/sample: %.2fx"
          % (med[0], args.workers, med[4], med[0] / med[4], med[1], med[3], med[1] / med[3]))


if __name__ == "__main__":
    main()
