"""What dtype=torch.bfloat16 and memory_format=torch.channels_last cost in sluice.Loader, against
NCHW float32 batches, with nothing else in the loop (the loader's whole cost shows).

Two cases, each a Loader over one split, read pass after pass:
- arrays: N random 3x32x32 u8 records (CIFAR's shape), RandomCrop(32, padding=4) +
  RandomHorizontalFlip, normalized per channel by the Loader (normalize=): the chain outputs u8
  and the conversion to the batch's dtype and layout is the last step.
- photos: a folder of generated photo-like JPEGs (photo_folder.py, 128-512 px; or --folder),
  DecodeImage + RandomResizedCrop(SIZE) + RandomHorizontalFlip + Normalize (x/255), all in
  the chain: the chain outputs float32 CHW and bf16 / channels_last add a conversion or a
  transpose after it.

For each case the four batch kinds (float32 or bfloat16, contiguous or channels_last) run in
turn, in a rotating order, --rounds times; a run is --passes passes, and its rate is its samples
over the wall clock of its passes after the first. Printed: each kind's median rate (samples/s)
and its cost against float32 NCHW of the same rounds, 1 - rate / rate(float32 NCHW).

  /usr/bin/python3 bench/loader_layouts.py --build build [--rounds 5] [--images 1500]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build", help="the build directory (its python/)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--records", type=int, default=20000, help="records of the arrays case")
    p.add_argument("--size", type=int, default=224, help="the photos' output side")
    p.add_argument("--cases", default="arrays,photos")
    import photo_folder
    photo_folder.add_arguments(p)
    args = p.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    if args.sluice_shard == "build/tools/sluice-shard":
        args.sluice_shard = os.path.join(args.build, "tools", "sluice-shard")
    import numpy as np
    import torch
    import sluice
    import sluice.transforms as T

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    kinds = [(torch.float32, torch.contiguous_format), (torch.bfloat16, torch.contiguous_format),
             (torch.float32, torch.channels_last), (torch.bfloat16, torch.channels_last)]
    names = {k: "%s %s" % ("float32" if k[0] == torch.float32 else "bfloat16",
                           "NCHW" if k[1] == torch.contiguous_format else "channels_last")
             for k in kinds}
    with tempfile.TemporaryDirectory() as work:
        cases = {}
        if "arrays" in args.cases:
            rng = np.random.default_rng(0)
            path = os.path.join(work, "arrays")
            sluice.write_dataset(path, "train",
                                 rng.integers(0, 256, (args.records, 32, 32, 3), np.uint8),
                                 (np.arange(args.records) % 10).astype(np.uint8))
            cases["arrays (3x32x32, crop + flip, normalize=)"] = (path, dict(
                transforms=[T.RandomCrop(32, padding=4), T.RandomHorizontalFlip()],
                normalize=(mean, std), batch_size=256))
        if "photos" in args.cases:
            folder, paths, dataset = photo_folder.prepare(args, work)
            print("photos:", photo_folder.describe(paths))
            cases["photos (DecodeImage + RandomResizedCrop(%d) + flip + Normalize)"
                  % args.size] = (dataset, dict(
                      transforms=[T.DecodeImage(), T.RandomResizedCrop(args.size),
                                  T.RandomHorizontalFlip(),
                                  T.Normalize(mean, std)], batch_size=64))
        print("torch %s, %d usable cores, %d rounds of %d passes"
              % (torch.__version__, len(os.sched_getaffinity(0)), args.rounds, args.passes))
        for case, (path, kwargs) in cases.items():
            rates = {k: [] for k in kinds}
            for r in range(args.rounds):
                order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
                for kind in order:
                    loader = sluice.Loader(path, shuffle=True, seed=r, dtype=kind[0],
                                           memory_format=kind[1], **kwargs)
                    samples, seconds = 0, 0.0
                    for i in range(args.passes):
                        start, n = time.perf_counter(), 0
                        for x, _ in loader:
                            n += x.shape[0]
                        if i > 0:
                            samples, seconds = samples + n, seconds + time.perf_counter() - start
                    rates[kind].append(samples / seconds)
            base = rates[kinds[0]]
            print("\n%s" % case)
            print("%-24s %14s %s" % ("batches", "samples/s", "cost vs float32 NCHW: median "
                                     "(per round)"))
            for kind in kinds:
                costs = [1 - a / b for a, b in zip(rates[kind], base)]
                print("%-24s %14.0f %+6.1f%% (%s)"
                      % (names[kind], statistics.median(rates[kind]),
                         100 * statistics.median(costs),
                         " ".join("%+.1f%%" % (100 * c) for c in costs)))


if __name__ == "__main__":
    main()
