#!/usr/bin/env python3
"""Remote datasets' read rates (docs/storage.md), against the same dataset on local disk:

1. warm cache: sluice.Loader over an http:// dataset whose frames are all in the local cache,
   against the local directory (goal: at least 0.95 of the local rate), and the same for
   sluice-train's reference job;
2. cold, with a delaying, rate-capping proxy in front of nginx (20 ms added to every request, the
   total bandwidth capped): the bandwidth reached at each read concurrency, as a fraction of the
   cap (goal: at least 0.8);
3. memory under 1 s of latency: the peak resident memory of a pass at 1 s per request against
   the same pass at no added latency (goal: bounded by the read concurrency's frames).

Every server runs on 127.0.0.1 (python/tests/object_servers.py). Fashion-MNIST's training split
(Debian's dataset-fashion-mnist) four times over, sharded with sluice.write_dataset.

  PYTHONPATH=build/python /usr/bin/python3 bench/remote_read.py [--rounds 3] [--mb-per-s 40]
      [--build build]
"""
import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

import numpy as np  # noqa: E402

import sluice  # noqa: E402
from object_servers import delay_proxy, nginx_server  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def write_dataset(out):
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    # Four copies: passes long enough (240,000 records, 109 MB stored) that a pass's start-up
    # (the manifest, each shard's head and index) does not set the rate.
    sluice.write_dataset(out, "train", np.concatenate([images] * 4), np.concatenate([labels] * 4))


def one_pass(path, passes=1, **kwargs):
    """Seconds for `passes` passes of one Loader of uint8 batches of 256 over `path`, and the
    samples they gave. One pass of this dataset is about 0.1 s, and identical passes that short
    differ by up to 30% on a 2-core machine: the warm-cache figures time five."""
    loader = sluice.Loader(path, batch_size=256, dtype=__import__("torch").uint8,
                           work_ahead=False, **kwargs)
    t0 = time.perf_counter()
    n = 0
    for _ in range(passes):
        for x, _ in loader:
            n += x.shape[0]
    return time.perf_counter() - t0, n


def stored_bytes(directory):
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
               if f.endswith(".shard"))


# The resident memory now (VmRSS), sampled at each batch: the peak (ru_maxrss) includes the
# imports' transient peak, under which a loader's few MB can hide (it measured 0.0 MB).
CHILD = r"""
import sys, time, torch
sys.path.insert(0, %(build)r)
import sluice
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
base = rss()
loader = sluice.Loader(%(url)r, batch_size=256, dtype=torch.uint8, work_ahead=False,
                       read_concurrency=%(c)d, cache_bytes=0)
n, top = 0, base
for i, (x, _) in enumerate(loader):
    n += x.shape[0]
    top = max(top, rss())
    if i == %(batches)d:
        break
print(top - base)
"""


def peak_rss(url, concurrency, batches):
    build = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
    code = CHILD % {"build": build, "url": url, "c": concurrency, "batches": batches}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--build", default="build", help="the build directory (sluice-train)")
    ap.add_argument("--mb-per-s", type=float, default=40.0, help="the proxy's bandwidth cap")
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    ap.add_argument("--passes", type=int, default=5,
                    help="loader passes timed together in each warm-cache round")
    ap.add_argument("--parts", default="warm,train,cold",
                    help="which to run: warm (the loader), train (sluice-train), cold (the "
                         "concurrency sweep and the memory bound)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if not parts or not parts <= {"warm", "train", "cold"}:
        ap.error("--parts: expected a comma-separated subset of warm,train,cold, got %r"
                 % args.parts)
    tmp = tempfile.mkdtemp(prefix="sluice-remote-bench-")
    try:
        root = os.path.join(tmp, "www")
        write_dataset(os.path.join(root, "fm"))
        local = os.path.join(root, "fm")
        size = stored_bytes(local)
        results = {"dataset_bytes": size}
        with nginx_server(root, tmp) as web:
            url = web.url + "/fm"
            cache = os.path.join(tmp, "cache")
            one_pass(url, cache_dir=cache)  # fills the cache
            if "warm" in parts:
                local_rates, warm_rates = [], []
                for _ in range(args.rounds):
                    t, n = one_pass(local, args.passes)
                    local_rates.append(n / t)
                    t, n = one_pass(url, args.passes, cache_dir=cache)
                    warm_rates.append(n / t)
                lr, wr = statistics.median(local_rates), statistics.median(warm_rates)
                print("warm cache, %d loader passes per round: %.0f samples/s vs local %.0f: "
                      "%.3f of local (rounds %s)"
                      % (args.passes, wr, lr, wr / lr,
                         ", ".join("%.3f" % (w / l) for w, l in zip(warm_rates, local_rates))))
                results["warm"] = {"local_samples_per_s": lr, "warm_samples_per_s": wr,
                                   "ratio": wr / lr}
            if "train" in parts:
                # The same in a training job: sluice-train's reference MLP, 3 epochs.
                train = os.path.join(args.build, "tools", "sluice-train")
                report = os.path.join(tmp, "r.json")

                def train_rate(data):
                    subprocess.run([train, "--data", data, "--epochs", "3", "--quiet", "--device",
                                    "cpu", "--report=false", "--report-json", report,
                                    "--cache-dir", cache], check=True, capture_output=True)
                    with open(report) as f:
                        return json.load(f)["measured_samples_per_s"]

                train_rate(url)
                tl, tw = [], []
                for _ in range(args.rounds):
                    tl.append(train_rate(local))
                    tw.append(train_rate(url))
                print("warm cache, sluice-train 3 epochs: %.0f samples/s vs local %.0f: %.3f of "
                      "local (rounds %s)" % (statistics.median(tw), statistics.median(tl),
                                             statistics.median(tw) / statistics.median(tl),
                                             ", ".join("%.2f" % (w / l) for w, l in zip(tw, tl))))
                results["warm_train"] = {"local_samples_per_s": statistics.median(tl),
                                         "warm_samples_per_s": statistics.median(tw)}
            if "cold" in parts:
                cap = args.mb_per_s * 1e6
                with delay_proxy("127.0.0.1", web.port, delay_s=args.delay_ms / 1e3,
                                 bytes_per_s=cap) as proxy:
                    purl = proxy.url + "/fm"
                    sweep = []
                    for c in [None] + [int(v) for v in args.concurrency.split(",")]:
                        best, chosen = 0.0, c
                        for _ in range(max(1, args.rounds - 1)):
                            loader = sluice.Loader(purl, batch_size=256, work_ahead=False,
                                                   dtype=__import__("torch").uint8, cache_bytes=0,
                                                   read_concurrency=c)
                            t0 = time.perf_counter()
                            for _ in loader:
                                pass
                            t = time.perf_counter() - t0
                            if size / t > best:
                                best = size / t
                                chosen = loader.report()["network"]["read_concurrency"]
                        sweep.append({"concurrency": c or "tuned", "chosen": chosen,
                                      "bytes_per_s": best, "of_cap": best / cap})
                        print("cold, %.0f ms per request, cap %.0f MB/s: read concurrency %s: "
                              "%.1f MB/s, %.2f of the cap" % (
                                  args.delay_ms, args.mb_per_s,
                                  "%3d" % c if c else "tuned (chose %d)" % chosen,
                                  best / 1e6, best / cap))
                    results["cold"] = sweep
                    proxy.bytes_per_s = None
                    proxy.delay_s = 1.0
                    slow = peak_rss(purl, 64, 12)
                    proxy.delay_s = 0.0
                    fast = peak_rss(purl, 64, 12)
                    print("resident memory growth over the imports (VmRSS at each batch), 13 "
                          "batches at read concurrency 64: %.1f MB at 1 s per request, %.1f MB at none (64 frames of about %.0f KB: "
                          "%.1f MB)" % (slow / 1e6, fast / 1e6, size / (4 * 235) / 1e3,
                                        64 * size / (4 * 235) / 1e6))
                    results["memory"] = {"rss_1s_bytes": slow, "rss_0s_bytes": fast}
        print(json.dumps(results))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
