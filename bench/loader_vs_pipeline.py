"""sluice.Loader iteration against the C++ pipeline on the same data, in one process.

    PYTHONPATH=build/python /usr/bin/python3 bench/loader_vs_pipeline.py DATASET \
        [--batch-size 256] [--threads 2] [--rounds 7] [--profile]

Each round runs, for shuffle False and True in turn, one epoch of `sluice.Loader` (uint8,
an empty loop body) and one epoch of the same loader's options drained in C++
(`_LoaderCore._drain_epoch`: Pipeline::Next in a loop, no Python between batches). The order
alternates between rounds so neither side always runs first on a machine whose load drifts.
Both times run from the pipeline's creation to the end of the epoch. Prints each round and the
medians; the ratio is Loader / C++ per round, then its median (docs/benchmarks.md).

Then the Python cost of one batch alone: with a pool of 200 buffers filled while the
consumer sleeps, next() on batches already waiting (the median over 5 x 60 calls), and its
parts: the C++ _Pass.next (wait, capsules, the labels' int64 copy) and torch's from_dlpack of
both capsules.

--profile adds a per-batch breakdown of the Loader's next() (cProfile over one epoch).
"""
import argparse
import cProfile
import pstats
import statistics
import time

import torch

import sluice


def loader_epoch(loader):
    """(samples, seconds) of one epoch of `loader`, the loop body empty."""
    samples = 0
    start = time.perf_counter()
    for images, _labels in loader:
        samples += images.shape[0]
    return samples, time.perf_counter() - start


def drain_epoch(loader, epoch):
    """(samples, seconds) of the loader's options drained in C++."""
    _batches, samples, seconds = loader._core._drain_epoch(epoch)
    return samples, seconds


def ready_batch_costs(dataset, batch_size, threads, rounds=5, calls=60):
    """Median microseconds of next(), _Pass.next and the two from_dlpack on waiting batches."""
    loader = sluice.Loader(dataset, batch_size, threads=threads, dtype=torch.uint8,
                           pool_size=200)
    clock = time.perf_counter
    whole, core, wrap = [], [], []
    for _ in range(rounds):
        batches = iter(loader)
        time.sleep(2.0)  # the pipeline fills its pool
        run = loader._pass
        for _ in range(calls):
            start = clock()
            next(batches)
            whole.append(clock() - start)
        for _ in range(calls):
            start = clock()
            item = run.next(0)
            core.append(clock() - start)
            start = clock()
            images = torch.utils.dlpack.from_dlpack(item[0])
            labels = torch.utils.dlpack.from_dlpack(item[1])
            wrap.append(clock() - start)
            del images, labels, item
        for _ in batches:
            pass
    start = clock()
    batches = iter(loader)
    start_ms = (clock() - start) * 1e3
    for _ in batches:
        pass
    return [statistics.median(v) * 1e6 for v in (whole, core, wrap)] + [start_ms]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    loaders = {shuffle: sluice.Loader(args.dataset, args.batch_size, shuffle=shuffle,
                                      threads=args.threads, dtype=torch.uint8)
               for shuffle in (False, True)}
    for loader in loaders.values():  # warm: page cache, first pass
        loader_epoch(loader)
        drain_epoch(loader, 0)
    rates = {(shuffle, side): [] for shuffle in loaders for side in ("loader", "cpp")}
    ratios = {shuffle: [] for shuffle in loaders}
    print("batch %d, u8, threads %d, %d rounds (M samples/s)" % (args.batch_size, args.threads,
                                                              args.rounds))
    for round_index in range(args.rounds):
        for shuffle, loader in loaders.items():
            epoch = loader._epoch
            sides = ("loader", "cpp") if round_index % 2 == 0 else ("cpp", "loader")
            got = {}
            for side in sides:
                samples, seconds = (loader_epoch(loader) if side == "loader"
                                    else drain_epoch(loader, epoch))
                got[side] = samples / seconds / 1e6
                rates[(shuffle, side)].append(got[side])
            ratios[shuffle].append(got["loader"] / got["cpp"])
            print("round %d shuffle=%-5s  Loader %.3f  C++ %.3f  ratio %.2f"
                  % (round_index, shuffle, got["loader"], got["cpp"], ratios[shuffle][-1]),
                  flush=True)
    for shuffle in loaders:
        print("median shuffle=%-5s  Loader %.3f  C++ %.3f M samples/s  ratio %.2f (per-round "
              "ratios %s)" % (shuffle, statistics.median(rates[(shuffle, "loader")]),
                              statistics.median(rates[(shuffle, "cpp")]),
                              statistics.median(ratios[shuffle]),
                              " ".join("%.2f" % r for r in ratios[shuffle])))
    whole, core, wrap, start_ms = ready_batch_costs(args.dataset, args.batch_size, args.threads)
    print("\nnext() on a waiting batch: %.1f us (C++ _Pass.next %.1f us, 2 x from_dlpack %.1f us, "
          "the rest Python); iter(loader) %.1f ms" % (whole, core, wrap, start_ms))
    if args.profile:
        loader = loaders[False]
        profile = cProfile.Profile()
        profile.enable()
        loader_epoch(loader)
        profile.disable()
        batches = len(loader)
        stats = pstats.Stats(profile)
        print("\ncProfile of one epoch (%d batches): per-batch microseconds" % batches)
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][3])[:12]
        for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in rows:
            print("  %8.1f cum %8.1f own  %6d calls  %s:%d(%s)" % (
                cumtime / batches * 1e6, tottime / batches * 1e6, calls,
                filename.split("/")[-1], line, name))


if __name__ == "__main__":
    main()
