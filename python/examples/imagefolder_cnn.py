"""Trains a small CNN on an ImageFolder of photos in PyTorch, with a train and a validation
loader, mixed precision and channels_last: the script a torchvision user writes, where the
loaders are sluice.Loader (decode, crop, resize, flip and normalize in sluice's C++ pipeline)
or, with --loader torchvision, ImageFolder + DataLoader, everything else the same.

    # ROOT/train/<class>/*.jpg and ROOT/val/<class>/*.jpg, as for torchvision's ImageFolder
    build/tools/sluice-shard create --image-folder ROOT/train --out data
    build/tools/sluice-shard create --image-folder ROOT/val --out data --split val
    PYTHONPATH=build/python /usr/bin/python3 python/examples/imagefolder_cnn.py data
    PYTHONPATH=build/python /usr/bin/python3 python/examples/imagefolder_cnn.py ROOT \\
        --loader torchvision                      # the same run on ImageFolder + DataLoader

The transforms are torchvision's own objects, given to either loader unchanged: before
ToTensor they work on PIL images (PIL's resampling: sluice gives the same pixels, bitwise).
Training: RandomResizedCrop(--size) + RandomHorizontalFlip; validation: Resize(--size / 0.875)
+ CenterCrop(--size), as torchvision's reference recipes evaluate. --amp runs the forward pass
under torch.autocast (bfloat16 on the CPU, float16 with a GradScaler on CUDA); the model and
the batches are channels_last (sluice's preprocess threads write that memory order directly).
Prints the loss every --log-every steps and the validation accuracy after each epoch.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as TV

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's, as the recipes use


def transforms(size):
    train = [TV.RandomResizedCrop(size), TV.RandomHorizontalFlip(), TV.ToTensor(),
             TV.Normalize(MEAN, STD)]
    val = [TV.Resize(int(size / 0.875)), TV.CenterCrop(size), TV.ToTensor(),
           TV.Normalize(MEAN, STD)]
    return train, val


def sluice_loaders(data, size, batch_size, seed, device, dtype):
    import sluice
    train_tf, val_tf = transforms(size)
    # The Loader decodes the stored JPEG/PNG bytes first (DecodeImage), then runs the list.
    kwargs = dict(device=device, dtype=dtype, memory_format=torch.channels_last)
    train = sluice.Loader(data, batch_size, split="train", shuffle=True, seed=seed,
                          drop_last=True, transforms=[sluice.transforms.DecodeImage()] + train_tf,
                          **kwargs)
    val = sluice.Loader(data, 256, split="val", transforms=[sluice.transforms.DecodeImage()] +
                        val_tf, **kwargs)
    return train, val, len(train.classes)


def torchvision_loaders(root, size, batch_size, seed, workers):
    from torchvision.datasets import ImageFolder
    train_tf, val_tf = transforms(size)
    train_set = ImageFolder(os.path.join(root, "train"), TV.Compose(train_tf))
    val_set = ImageFolder(os.path.join(root, "val"), TV.Compose(val_tf))
    generator = torch.Generator().manual_seed(seed)
    train = torch.utils.data.DataLoader(train_set, batch_size, shuffle=True, drop_last=True,
                                        num_workers=workers, generator=generator,
                                        persistent_workers=workers > 0)
    val = torch.utils.data.DataLoader(val_set, 256, num_workers=workers)
    return train, val, len(train_set.classes)


class SmallCNN(nn.Module):
    """Three conv-BN-ReLU blocks (stride 2 after the first), global average pool, linear."""

    def __init__(self, classes, width=32):
        super().__init__()
        chans = [3, width, 2 * width, 4 * width]
        self.blocks = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, stride=1 if i == 0 else 2,
                                    padding=1, bias=False),
                          nn.BatchNorm2d(chans[i + 1]), nn.ReLU(inplace=True))
            for i in range(3)])
        self.head = nn.Linear(chans[-1], classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.blocks(x), 1), 1))


def evaluate(model, loader, device, amp_dtype):
    correct = total = 0
    model.eval()
    with torch.no_grad(), torch.autocast(device.type, dtype=amp_dtype,
                                         enabled=amp_dtype is not None):
        for x, y in loader:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            correct += (model(x).argmax(1) == y).sum().item()
            total += y.numel()
    model.train()
    return correct / max(total, 1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="a sluice dataset directory with train and val splits, or with "
                                "--loader torchvision an ImageFolder root with train/ and val/")
    p.add_argument("--loader", choices=["sluice", "torchvision"], default="sluice")
    p.add_argument("--size", type=int, default=64, help="the training crop's side")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--amp", action="store_true", help="mixed precision (torch.autocast)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (torchvision)")
    p.add_argument("--log-every", type=int, default=100)
    args = p.parse_args(argv)

    device = torch.device(args.device)
    amp_dtype = (torch.float16 if device.type == "cuda" else torch.bfloat16) if args.amp else None
    torch.manual_seed(args.seed)
    if args.loader == "sluice":
        # With --amp the batches come in the autocast dtype: half the bytes to move and copy.
        train, val, classes = sluice_loaders(args.data, args.size, args.batch_size, args.seed,
                                             args.device, amp_dtype or torch.float32)
    else:
        train, val, classes = torchvision_loaders(args.data, args.size, args.batch_size,
                                                  args.seed, args.workers)
    model = SmallCNN(classes).to(device).to(memory_format=torch.channels_last)
    steps = args.epochs * len(train)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4,
                          nesterov=True)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, args.lr, total_steps=steps)
    scaler = torch.cuda.amp.GradScaler(enabled=amp_dtype == torch.float16)
    step, start = 0, time.perf_counter()
    for epoch in range(args.epochs):
        for x, y in train:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            schedule.step()
            step += 1
            if step % args.log_every == 0:
                print("epoch %d step %d loss %.4f (%.0f samples/s)" % (
                    epoch, step, loss.item(),
                    step * args.batch_size / (time.perf_counter() - start)), flush=True)
        print("epoch %d val accuracy %.4f" % (epoch, evaluate(model, val, device, amp_dtype)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
