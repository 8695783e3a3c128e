"""Trains a small CNN on 3-channel 32x32 images (CIFAR-10's shape) with augmentation, in
PyTorch, reading batches through sluice.Loader: random crop with padding, horizontal flip and
per-channel normalisation run in sluice's C++ pipeline, not in Python workers.

    sluice-shard create --cifar10 cifar-10-batches-bin --out data/cifar10            # train
    sluice-shard create --cifar10 cifar-10-batches-bin --split test --out data/cifar10
    PYTHONPATH=build/python /usr/bin/python3 python/examples/train_cnn.py data/cifar10 --epochs 2

Prints the loss every --log-every steps, then the test accuracy when the dataset has a test
split, and the loader's bottleneck report with --report.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import sluice
from sluice import transforms as T

# CIFAR-10's per-channel mean and std (of x/255 over its training set).
MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


class SmallCNN(nn.Module):
    def __init__(self, channels=3, height=32, width=32, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * (height // 4) * (width // 4), 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def evaluate(model, path, batch_size, device):
    loader = sluice.Loader(path, batch_size, split="test", device=device,
                           transforms=[T.Normalize(MEAN, STD)])
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y.to(x.device)).sum().item()
            total += y.numel()
    model.train()
    return correct / max(total, 1)


def has_split(path, split):
    return os.path.exists(os.path.join(path, split + ".manifest.json"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="a sluice dataset directory with a train split (3x32x32 images)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: never)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--report", action="store_true", help="print the loader's bottleneck report")
    args = p.parse_args(argv)

    loader = sluice.Loader(args.data, args.batch_size, split="train", shuffle=True, seed=0,
                           device=args.device, transforms=[
                               T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                               T.Normalize(MEAN, STD)])
    torch.manual_seed(0)
    first, _ = next(iter(sluice.Loader(args.data, 1, split="train", device=args.device)))
    _, channels, height, width = first.shape
    model = SmallCNN(channels, height, width).to(first.device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step, start = 0, time.perf_counter()
    for epoch in range(args.epochs):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y.to(x.device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % args.log_every == 0 or step == args.steps:
                print("epoch %d step %d loss %.4f (%.0f samples/s)" % (
                    epoch, step, loss.item(), step * args.batch_size /
                    (time.perf_counter() - start)), flush=True)
            if args.steps and step >= args.steps:
                break
        if args.steps and step >= args.steps:
            break
    if args.report:
        print(loader.report_text())
    if has_split(args.data, "test"):
        print("test accuracy %.4f" % evaluate(model, args.data, 256, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
