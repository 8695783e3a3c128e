#!/usr/bin/env python3
"""sluice.probe's prediction of the switch, checked: a DataLoader job, probed and replayed, the
sluice.Loader it would switch to measured alone (Probe.measure_switch), the prediction read
from the report, then the same step run on that sluice.Loader and its rate measured.

  PYTHONPATH=build/python /usr/bin/python3 bench/probe_switch.py [--cases arrays,jpeg]
      [--repeats 3] [--images 12000]

Two jobs, each a small model stepped on one torch thread:
  arrays: Fashion-MNIST (Debian's dataset-fashion-mnist) through a torchvision-style Dataset
          (PIL image, RandomCrop(28, padding=2), ToTensor), DataLoader(num_workers=0), an MLP
          784-512-10; sluice.Loader on the same split written with sluice.write_dataset, with
          RandomCrop(28, padding=2).
  jpeg:   generated photo-like JPEGs (bench/photo_folder.py, 96-320 px) through torchvision's
          ImageFolder (RandomResizedCrop(64), ToTensor), DataLoader(num_workers=2), a tiny CNN;
          sluice.Loader on the folder ingested with sluice-shard, with DecodeImage,
          RandomResizedCrop(64).
Each round: the probed DataLoader for --steps steps, a replay of 50 steps, measure_switch over
one pass (or --switch-batches batches), then the step on that sluice.Loader over whole passes (1 of the
arrays, 3 of the JPEGs), timed from the start. Prints the predicted and measured rates after switching and the error, per round, and
the median error.

The step's own rate must hold still for any prediction of it to hold, so by default the script
re-runs itself with a steady step (--default-step runs it as Debian's torch gives it):
  OPENBLAS_NUM_THREADS=1  Debian's torch uses OpenBLAS, whose threads torch.set_num_threads(1)
                          does not bind: the "one-thread" step ran on both cores (1.98 cores busy)
                          and shared them badly with any loader's threads.
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...:trim_threshold=...
                          glibc handed the step's large freed tensors back to the kernel and
                          faulted them in again each step: 20-38% of its CPU time in the kernel,
                          and its rate swung 2x between rounds (13-48 k samples/s).
sluice.probe's notes name both conditions in a user's job (docs/bottleneck.md, "Any loader").
"""
import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import sluice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photo_folder  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"


class Fashion(torch.utils.data.Dataset):
    def __init__(self, images, labels):
        from torchvision import transforms
        self.images, self.labels = images, labels
        self.t = transforms.Compose([transforms.RandomCrop(28, padding=2), transforms.ToTensor()])

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        from PIL import Image
        return self.t(Image.fromarray(self.images[i], mode="L")), int(self.labels[i])


def mlp_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    return sgd_step(model)


def cnn_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    return sgd_step(model)


def sgd_step(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(x, y):
        x = x.float()
        loss = torch.nn.functional.cross_entropy(model(x), y.long())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def rate(loader, passes, step):
    """samples/s of `step` over `passes` whole passes of `loader`, timed from the start of the
    first: the pipeline works ahead (a small dataset is all decoded before its first batch is
    delivered), so a window opened at the first batch would time the step alone."""
    n, t0 = 0, time.perf_counter()
    for _ in range(passes):
        for x, y in loader:
            step(x, y)
            n += y.shape[0]
    return n / (time.perf_counter() - t0)


def one_round(make_dataloader, make_sluice, step, steps, switch_batches, passes):
    p = sluice.probe(make_dataloader())
    for i, (x, y) in enumerate(p):
        if i == steps:
            break
        step(x, y)
    for x, y in p.replay(steps=50):
        step(x, y)
    p.measure_switch(make_sluice(), batches=switch_batches or None)
    report = p.report()
    predicted = report["probe"]["switch_samples_per_s"]
    measured = rate(make_sluice(), passes, step)
    return {"dataloader": report["measured_samples_per_s"],
            "free_data": report["probe"]["free_data_samples_per_s"],
            "predicted": predicted, "binding": report["probe"]["switch_binding"],
            "sluice_alone": report["probe"]["switch_sluice_samples_per_s"],
            "sluice_cpu_us": report["probe"]["switch_sluice_cpu_us_per_sample"],
            "step_cores": report["probe"]["replay_cores_busy"],
            "step_kernel_pct": report["probe"]["replay_kernel_pct"],
            "step_cpu_us": report["probe"]["switch_step_cpu_us_per_sample"],
            "measured": measured, "error_pct": 100 * abs(predicted - measured) / measured,
            "sentence": report["verdict"]["sentence"]}


def arrays_case(work, args):
    arrays = []
    for name, offset in (("train-images-idx3-ubyte", 16), ("train-labels-idx1-ubyte", 8)):
        with gzip.open(os.path.join(FASHION, name + ".gz"), "rb") as f:
            arrays.append(np.frombuffer(f.read(), np.uint8, offset=offset))
    images, labels = arrays[0].reshape(-1, 28, 28), arrays[1]
    out = os.path.join(work, "fm")
    sluice.write_dataset(out, "train", images, labels)
    return (lambda: torch.utils.data.DataLoader(Fashion(images, labels), batch_size=256,
                                                shuffle=True, num_workers=0),
            lambda: sluice.Loader(out, batch_size=256, shuffle=True,
                                  transforms=[sluice.transforms.RandomCrop(28, padding=2)]),
            mlp_step())


def jpeg_case(work, args):
    from torchvision import datasets, transforms
    folder = os.path.join(work, "photos")
    photo_folder.write_photo_folder(folder, args.images, 10, seed=0, min_side=96, max_side=320)
    shards = os.path.join(work, "jpeg")
    subprocess.run([os.path.join(args.build, "tools", "sluice-shard"), "create",
                    "--image-folder", folder, "--out", shards, "--quiet"], check=True)
    t = transforms.Compose([transforms.RandomResizedCrop(64), transforms.ToTensor()])
    return (lambda: torch.utils.data.DataLoader(datasets.ImageFolder(folder, t), batch_size=64,
                                                shuffle=True, num_workers=2),
            lambda: sluice.Loader(shards, batch_size=64, shuffle=True,
                                  transforms="DecodeImage(), RandomResizedCrop(64)"),
            cnn_step())


STEADY_STEP = {"OPENBLAS_NUM_THREADS": "1",
               "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=268435456:"
                                 "glibc.malloc.trim_threshold=1073741824"}


def main():
    if "--default-step" not in sys.argv and os.environ.get("SLUICE_PROBE_SWITCH_STEADY") != "1":
        # Both settings are read when the process starts (glibc) or loads OpenBLAS (torch's
        # import): run again with them.
        os.environ.update(STEADY_STEP, SLUICE_PROBE_SWITCH_STEADY="1")
        os.execv(sys.executable, [sys.executable] + sys.argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--default-step", action="store_true",
                    help="run the step as the process's defaults give it (OpenBLAS's threads, "
                         "glibc's returning of freed memory), not steadied")
    ap.add_argument("--build", default="build")
    ap.add_argument("--cases", default="arrays,jpeg")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--switch-batches", type=int, default=0,
                    help="batches for measure_switch (0: one whole pass)")
    # 12,000: a pass of about 3 s. Each pass restarts the pipeline, and a pass of under a second
    # (3,000 images) spends a fifth of it filling and draining, which the steady-state
    # prediction does not count (docs/benchmarks.md, 2026-12-03 20:45).
    ap.add_argument("--images", type=int, default=12000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("step: %s" % ("as the defaults give it" if args.default_step else
                        ", ".join("%s=%s" % kv for kv in STEADY_STEP.items())), flush=True)
    with tempfile.TemporaryDirectory(prefix="sluice-probe-switch-") as work:
        for name in args.cases.split(","):
            make_dl, make_sl, step = {"arrays": arrays_case, "jpeg": jpeg_case}[name](work, args)
            errors = []
            for r in range(args.repeats):
                m = one_round(make_dl, make_sl, step, args.steps, args.switch_batches,
                              1 if name == "arrays" else 3)
                errors.append(m["error_pct"])
                print("%s round %d: DataLoader %.0f samples/s, free-data bound %.0f; sluice alone "
                      "%.0f at %.1f us CPU per sample, the step %.1f us (%.2f cores, %.0f%% in "
                      "the kernel); switch predicted %.0f (binds: %s), measured on sluice.Loader "
                      "%.0f: error %.1f%%"
                      % (name, r + 1, m["dataloader"], m["free_data"], m["sluice_alone"],
                         m["sluice_cpu_us"], m["step_cpu_us"], m["step_cores"],
                         m["step_kernel_pct"], m["predicted"], m["binding"],
                         m["measured"], m["error_pct"]), flush=True)
            print("%s: median error %.1f%%; last verdict: %s" % (
                name, statistics.median(errors), m["sentence"]), flush=True)


if __name__ == "__main__":
    main()
