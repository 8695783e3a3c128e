#!/usr/bin/env python3
"""sluice.probe's prediction, checked: a DataLoader-bound job, then the same step on sluice.Loader.

  PYTHONPATH=build/python /usr/bin/python3 bench/probe_dataloader.py \
      [--data /usr/share/datasets/fashion-mnist] [--batch-size 256] [--steps 60] \
      [--replay-steps 60] [--chunks 20] [--repeats 3]

The job: Fashion-MNIST's train split through a torchvision-style Dataset whose per-sample
transform is torchvision's (PIL image, RandomCrop(28, padding=2), ToTensor), a DataLoader with
num_workers=0, and a cheap MLP step (784-512-10, SGD, one torch thread). sluice.probe measures
the DataLoader's wait and the step, replays the last batch and predicts the rate with free
data. Then the same step runs on sluice.Loader (the same split sharded with
sluice.write_dataset, ToTensor values, no shuffle, default threads) after its first batch,
interleaved with the replay in --chunks pairs (measure()). Prints, per round, the measured
DataLoader rate, the prediction, the sluice.Loader rate and the prediction's error (median
ratio over the pairs), the probe's verdict, and one JSON line. python/tests/test_probe.py runs
measure() as its validation.
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


class TransformedFashion(torch.utils.data.Dataset):
    """(image, label) pairs with a per-sample transform, as torchvision's datasets do."""

    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.images[i]), int(self.labels[i])


def pil_to_tensor():
    """torchvision's FashionMNIST transform path with a common augmentation: a PIL image, a
    random crop of a 2-pixel padded copy, then ToTensor."""
    from PIL import Image
    from torchvision import transforms
    augment = transforms.Compose([transforms.RandomCrop(28, padding=2), transforms.ToTensor()])
    return lambda img: augment(Image.fromarray(img, mode="L"))


def make_step(hidden=512):
    """A cheap MLP training step on (images [B,1,28,28] float32, labels [B] int64)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        loss = loss_fn(model(x.reshape(-1, 784)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def sluice_rate(batches, steps, step):
    """samples/s of `step` over the next `steps` batches of the iterator `batches`."""
    n = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = next(batches)
        step(x, y)
        n += y.shape[0]
    return n / (time.perf_counter() - t0)


def measure(images, labels, dataset_dir, batch_size=256, steps=60, replay_steps=50, chunks=8):
    """The probe's figures over a DataLoader-bound job, then its prediction against the
    sluice.Loader rate of the same step: `chunks` times a replay of replay_steps / chunks steps
    then as many steps on sluice.Loader. Interleaved in pairs so that both halves of a pair see
    the same load on a shared machine: the error is that of the median ratio (replay rate /
    sluice rate) over the pairs. Returns a dict of rates (samples/s: the probe's prediction over
    all the replays, the median sluice rate), the error and the verdict."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step = make_step()
        dl = torch.utils.data.DataLoader(TransformedFashion(images, labels, pil_to_tensor()),
                                         batch_size=batch_size, num_workers=0)
        p = sluice.probe(dl)
        for i, (x, y) in enumerate(p):
            if i == steps:  # this next() ended the last counted step
                break
            step(x, y)
        batches = iter(sluice.Loader(dataset_dir, batch_size=batch_size, shuffle=False))
        step(*next(batches))  # starts the pipeline
        per_chunk = max(1, replay_steps // chunks)
        predictions, rates = [], []
        done = (0.0, 0.0)  # replayed samples and seconds so far (the probe adds replays up)
        for _ in range(chunks):
            for x, y in p.replay(steps=per_chunk):
                step(x, y)
            report = p.report()
            seconds = report["probe"]["replay_seconds"]
            samples = report["probe"]["replay_samples_per_s"] * seconds
            predictions.append((samples - done[0]) / (seconds - done[1]))
            done = (samples, seconds)
            rates.append(sluice_rate(batches, per_chunk, step))
    finally:
        torch.set_num_threads(threads)
    predicted = report["probe"]["free_data_samples_per_s"]  # over every replayed chunk
    measured_sluice = statistics.median(rates)
    ratio = statistics.median(a / b for a, b in zip(predictions, rates))
    return {"dataloader": report["measured_samples_per_s"], "predicted": predicted,
            "speedup": report["probe"]["speedup"], "sluice": measured_sluice,
            "error_pct": 100.0 * abs(ratio - 1), "ratio": ratio,
            "verdict": report["verdict"]["class"],
            "limiting_stage": report["verdict"]["limiting_stage"],
            "sentence": report["verdict"]["sentence"], "predictions": predictions,
            "sluice_rates": rates, "text": p.report_text()}


def load_train(data):
    arrays = []
    for name, offset in (("train-images-idx3-ubyte", 16), ("train-labels-idx1-ubyte", 8)):
        with gzip.open(os.path.join(data, name + ".gz"), "rb") as f:
            arrays.append(np.frombuffer(f.read(), np.uint8, offset=offset))
    return arrays[0].reshape(-1, 28, 28), arrays[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--replay-steps", type=int, default=60)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    images, labels = load_train(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        sluice.write_dataset(tmp, "train", images, labels)
        rounds = []
        for r in range(args.repeats):
            m = measure(images, labels, tmp, args.batch_size, args.steps, args.replay_steps,
                        args.chunks)
            rounds.append(m)
            print("round %d: DataLoader %8.0f samples/s (%s, limit %s); predicted with free data "
                  "%8.0f (%.2fx); sluice.Loader %8.0f; error %.1f%% (median of the pairs)"
                  % (r + 1, m["dataloader"], m["verdict"], m["limiting_stage"], m["predicted"],
                     m["speedup"], m["sluice"], m["error_pct"]))
        print(rounds[-1]["text"], end="")
        med = {k: statistics.median(m[k] for m in rounds)
               for k in ("dataloader", "predicted", "sluice", "error_pct")}
        print(json.dumps({"batch_size": args.batch_size, "steps": args.steps,
                          "replay_steps": args.replay_steps, "median": med,
                          "rounds": [{k: v for k, v in m.items() if k != "text"}
                                     for m in rounds]}))


if __name__ == "__main__":
    main()
