#!/usr/bin/env python3
"""sluice.Loader against torch.utils.data.DataLoader on the same Fashion-MNIST files, in one run.

  PYTHONPATH=build/python /usr/bin/python3 bench/compare_dataloader_python.py \
      [--data /usr/share/datasets/fashion-mnist] [--batch-size 32] [--repeats 3] [--epochs-train 1]

Iteration: one epoch of the train split with an empty loop body (the batch is only touched), for
sluice.Loader (f32, ToTensor values, no shuffle; threads = usable cores) and DataLoader over
torchvision's FashionMNIST with ToTensor (workers 0 and 2); median samples/s of --repeats
rounds, the three alternating. Training: the seed script's step (784-128-10, SGD 0.01, one torch
thread) fed by each loader for --epochs-train epochs; samples/s, and sluice's report verdict.
Prints a table and one JSON line.
"""
import argparse
import gzip
import json
import os
import statistics
import tempfile
import time

import numpy as np
import torch

import sluice

FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def prepare(data, tmp):
    """Shards the train split with sluice.write_dataset and lays the IDX files out for
    torchvision; returns (dataset dir, torchvision root)."""
    raw = os.path.join(tmp, "torch", "FashionMNIST", "raw")
    os.makedirs(raw)
    arrays = {}
    for name in FILES:
        with gzip.open(os.path.join(data, name + ".gz"), "rb") as f:
            b = f.read()
        with open(os.path.join(raw, name), "wb") as f:
            f.write(b)
        arrays[name] = np.frombuffer(b, np.uint8, offset=16 if "images" in name else 8)
    out = os.path.join(tmp, "dataset")
    sluice.write_dataset(out, "train", arrays[FILES[0]].reshape(-1, 28, 28), arrays[FILES[1]])
    return out, os.path.join(tmp, "torch")


def iterate(batches):
    n = 0
    t0 = time.perf_counter()
    for x, y in batches:
        n += y.shape[0]
    return n / (time.perf_counter() - t0)


def train(batches, epochs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = 0
    t0 = time.perf_counter()
    for _ in range(epochs):
        for x, y in batches:
            loss = loss_fn(model(x.view(-1, 784)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += y.shape[0]
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs-train", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from torchvision import datasets, transforms
    with tempfile.TemporaryDirectory() as tmp:
        path, root = prepare(args.data, tmp)
        tv = datasets.FashionMNIST(root, train=True, download=False,
                                   transform=transforms.ToTensor())
        loader = sluice.Loader(path, batch_size=args.batch_size, shuffle=False)
        dl = {w: torch.utils.data.DataLoader(tv, batch_size=args.batch_size, num_workers=w)
              for w in (0, 2)}
        rounds = {"sluice": [], "dataloader_w0": [], "dataloader_w2": []}
        for _ in range(args.repeats):
            rounds["sluice"].append(iterate(loader))
            rounds["dataloader_w0"].append(iterate(dl[0]))
            rounds["dataloader_w2"].append(iterate(dl[2]))
        it = {k: statistics.median(v) for k, v in rounds.items()}
        loader.set_epoch(0)
        tr_sluice = train(loader, args.epochs_train)
        report = loader.report()
        tr_w0 = train(dl[0], args.epochs_train)
        best_dl = max(it["dataloader_w0"], it["dataloader_w2"])
        print("iteration, empty loop body, batch %d (median of %d):" % (args.batch_size,
                                                                      args.repeats))
        print("  sluice.Loader            %12.0f samples/s" % it["sluice"])
        print("  DataLoader, workers 0    %12.0f samples/s" % it["dataloader_w0"])
        print("  DataLoader, workers 2    %12.0f samples/s" % it["dataloader_w2"])
        print("  ratio sluice / best DataLoader: %.1fx" % (it["sluice"] / best_dl))
        print("training step (784-128-10, SGD, 1 torch thread), %d epoch(s):" % args.epochs_train)
        print("  sluice.Loader            %12.0f samples/s" % tr_sluice)
        print("  DataLoader, workers 0    %12.0f samples/s" % tr_w0)
        print("  sluice report: %s" % report["verdict"]["sentence"])
        print(json.dumps({"batch_size": args.batch_size, "iterate": it,
                          "train": {"sluice": tr_sluice, "dataloader_w0": tr_w0},
                          "verdict": report["verdict"]["class"],
                          "limiting_stage": report["verdict"]["limiting_stage"]}))


if __name__ == "__main__":
    main()
