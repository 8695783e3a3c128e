#!/usr/bin/env python3
"""The reference PyTorch job (Fashion-MNIST, 784-128-10, SGD; docs/benchmarks.md), measured the
way bench/compare_pytorch.sh needs.

  pytorch_reference.py --root DIR [--variant dataloader|preloaded] [--epochs 10] [--threads 1]
                       [--shuffle] [--batch-size 32] [--lr 0.01]

--variant dataloader is the script as written (torchvision FashionMNIST + DataLoader, ToTensor);
--variant preloaded is the fastest plain-PyTorch form (the data as one tensor, batches sliced).
DIR must hold FashionMNIST/raw/ with the IDX files. Prints one JSON line:
{"variant", "samples_per_second", "train_seconds", "wall_seconds", "test_accuracy", ...}.
"""
import argparse
import json
import time

import torch
from torch import nn, optim


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--variant", default="dataloader", choices=["dataloader", "preloaded"])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    args = ap.parse_args()
    wall0 = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    from torchvision import datasets, transforms
    to_tensor = transforms.ToTensor()
    train = datasets.FashionMNIST(root=args.root, train=True, download=False, transform=to_tensor)
    test = datasets.FashionMNIST(root=args.root, train=False, download=False, transform=to_tensor)
    device = torch.device(args.device)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    optimizer = optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    samples = 0
    train_seconds = 0.0
    if args.variant == "dataloader":
        loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size,
                                             shuffle=args.shuffle)
        batches = lambda epoch: loader
    else:
        x_all = train.data.reshape(-1, 784).float().div_(255.0)
        y_all = train.targets.clone()
        gen = torch.Generator().manual_seed(args.seed)

        def batches(epoch):
            order = torch.randperm(len(y_all), generator=gen) if args.shuffle else None
            for i in range(0, len(y_all), args.batch_size):
                if order is None:
                    yield x_all[i:i + args.batch_size], y_all[i:i + args.batch_size]
                else:
                    idx = order[i:i + args.batch_size]
                    yield x_all[idx], y_all[idx]
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        for x, y in batches(epoch):
            x, y = x.to(device), y.to(device)  # CPU memory -> GPU memory over PCIe
            loss = loss_fn(model(x.view(-1, 784)), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            samples += len(y)
        if device.type == "cuda":
            torch.cuda.synchronize()
        train_seconds += time.perf_counter() - t0
    with torch.no_grad():
        xt = test.data.reshape(-1, 784).float().div_(255.0).to(device)
        accuracy = (model(xt).argmax(1).cpu() == test.targets).float().mean().item()
    print(json.dumps({"variant": args.variant, "device": args.device, "threads": args.threads,
                      "epochs": args.epochs,
                      "samples": samples, "train_seconds": train_seconds,
                      "samples_per_second": samples / train_seconds,
                      "wall_seconds": time.perf_counter() - wall0,
                      "test_accuracy": accuracy}))


if __name__ == "__main__":
    main()
