"""sluice.Loader on encoded JPEGs against torchvision ImageFolder in a DataLoader, the same
transforms, side by side in one process (issue 23's second benchmark).

    PYTHONPATH=build/python /usr/bin/python3 bench/images_vs_imagefolder.py \
        [--images 2000] [--classes 10] [--seed 0] [--folder DIR] [--batch-size 256] \
        [--threads N] [--workers 2] [--rounds 3] [--sluice-shard build/tools/sluice-shard]

Data: --images photo-like JPEGs of 128-512 px per side, quality 90, 4:2:0 (bench/photo_folder.py
says what they are), generated into a temporary ImageFolder, or an existing ImageFolder
(--folder DIR). sluice reads the folder ingested with `sluice-shard create --image-folder`
(the files stored as they are); torchvision reads the folder's files.

Two loaders, each built once and iterated epoch after epoch as a training loop does (one
warm-up epoch each first, not counted: worker processes, pipelines and buffers starting):
- DataLoader: torchvision.datasets.ImageFolder(folder, transform=Compose([
  RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean, std)]))
  (the torchvision ImageNet recipe; PIL decodes and resizes; with --jitter, ColorJitter(0.4,
  0.4, 0.4) after the flip, on the PIL image, as timm's recipes) in
  torch.utils.data.DataLoader(shuffle=True, num_workers=--workers, persistent_workers=True,
  batch_size=--batch-size);
- sluice: sluice.Loader(shuffle=True, threads=--threads (default: all usable cores),
  transforms=[sluice.transforms.DecodeImage()] + the same Compose's transforms (the same
  torchvision objects; ToTensor is folded into Normalize, docs/python.md)), float32 batches.
  Before ToTensor they ran on PIL images, so sluice runs them with PIL's arithmetic (PIL's
  antialiased resampling in RandomResizedCrop, ImageEnhance in ColorJitter: the same pixels
  as torchvision's). With --sluice-ops, sluice's own ops instead: RandomResizedCrop(224)
  without antialiasing and ColorJitter's tensor arithmetic (torchvision's on a uint8 tensor),
  other pixels for the same recipe.
Both loops have an empty body. Each round runs one epoch of each, in turn; rates are samples/s
of each epoch's wall clock, medians over rounds; it prints both and the ratio sluice /
DataLoader (issue 23's goal: at least 3x).

Size: an epoch should last seconds, not milliseconds (a few thousand images): a
tiny folder measures the per-epoch start and drain more than the steady rate; a run
on 64 images only shows that the script works.
Not the same work with --sluice-ops, stated so the ratio is read right: on PIL images
torchvision's resize always antialiases (a downscale reads more source pixels), while sluice's
own RandomResizedCrop is torchvision's tensor path without antialias (docs/transforms.md, "The
ops"). ImageFolder decodes the whole image at full size with libjpeg-turbo (PIL's draft mode
is not used by ImageFolder); sluice decodes only the crop's window of a JPEG.
The DataLoader's workers are fork()ed (their first epoch) before the sluice Loader is built
and run: a fork makes every page of this process copy-on-write, so sluice buffers touched
before it would each fault again on their next write (bench/transforms_vs_dataloader.py).
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torchvision

import sluice
from sluice import transforms as T

import photo_folder

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def epoch_rate(loader):
    samples, start = 0, time.perf_counter()
    for images, _ in loader:
        samples += images.shape[0]
    return samples / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    photo_folder.add_arguments(p)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=None,
                   help="the sluice Loader's threads (default: all usable cores)")
    p.add_argument("--workers", type=int, default=2, help="the DataLoader's worker processes")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jitter", action="store_true",
                   help="add ColorJitter(0.4, 0.4, 0.4) after the flip on both sides (issue 38's "
                        "ImageNet recipe; goal >= 5x)")
    p.add_argument("--sluice-ops", action="store_true",
                   help="give sluice its own ops (tensor semantics: RandomResizedCrop without "
                        "antialiasing, ColorJitter's tensor arithmetic) instead of the same "
                        "torchvision objects (PIL semantics before ToTensor)")
    args = p.parse_args()
    TV = torchvision.transforms
    jitter = [TV.ColorJitter(0.4, 0.4, 0.4)] if args.jitter else []
    recipe = TV.Compose([TV.RandomResizedCrop(224), TV.RandomHorizontalFlip()] + jitter +
                        [TV.ToTensor(), TV.Normalize(MEAN, STD)])
    own = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()] + (
        [T.ColorJitter(0.4, 0.4, 0.4)] if args.jitter else []) + [T.Normalize(MEAN, STD)]
    with tempfile.TemporaryDirectory() as workdir:
        folder, paths, dataset = photo_folder.prepare(args, workdir)
        print("images: %s (%s); %d usable cores"
              % (photo_folder.describe(paths), "generated" if args.folder is None else folder,
                 len(os.sched_getaffinity(0))), flush=True)
        torch_loader = torch.utils.data.DataLoader(
            torchvision.datasets.ImageFolder(folder, transform=recipe),
            batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
            persistent_workers=args.workers > 0)
        epoch_rate(torch_loader)  # warm-up; forks the persistent workers before sluice starts
        # work_ahead=False: the DataLoader's epoch runs between the Loader's, and a Loader that
        # works ahead would do much of its next epoch then, outside its timed epoch (measured:
        # 15.8x with it, against the rates below without).
        loader = sluice.Loader(dataset, args.batch_size, shuffle=True, threads=args.threads,
                               transforms=[T.DecodeImage()] + (own if args.sluice_ops
                                                               else recipe.transforms),
                               work_ahead=False)
        epoch_rate(loader)  # warm-up epoch
        rows = []
        for r in range(args.rounds):
            rows.append((epoch_rate(loader), epoch_rate(torch_loader)))
            print("round %d: sluice %.0f samples/s, DataLoader %.0f samples/s: %.2fx"
                  % (r, rows[-1][0], rows[-1][1], rows[-1][0] / rows[-1][1]), flush=True)
    sluice_rate, dl_rate = (statistics.median(c) for c in zip(*rows))
    print("medians over %d rounds: sluice (threads=%s) %.0f samples/s, ImageFolder + DataLoader "
          "(%d workers) %.0f samples/s: %.2fx (goal >= %dx)"
          % (len(rows), "all" if args.threads is None else args.threads, sluice_rate,
             args.workers, dl_rate, sluice_rate / dl_rate, 5 if args.jitter else 3))


if __name__ == "__main__":
    main()
