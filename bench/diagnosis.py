"""The diagnosis benchmark: plant a bottleneck in one place, run the job, and measure how often
sluice's report names it, how stable that is, and how well its resource model predicts runs it
has not seen (docs/bottleneck.md, "How often the report is right").

For each case and each repetition (default 3):
  1. the job runs with the planted bottleneck and writes its report (--report-json);
  2. the job runs again with the planted stage made free (--what-if=STAGE): the model, fed by
     run 1 only, predicted that rate (model.if_free in the JSON) before it was measured;
  3. each advice entry of run 1 (verdict.advice) is applied and the job runs again: the gain is
     measured against run 1's rate.
Printed per case: the stage named in each repetition and whether that is the planted one,
whether the repetitions agree (stage and class), the model's predicted rate against the
measured one (run 1), the freed run's predicted against measured, and each advice entry's
measured gain. Then the totals against the goals (issue 34): every case named right and
stable, median |predicted - measured| / measured <= 10%, every advice entry >= 1.05x.

Usage (from the repository root, after the build):
  /usr/bin/python3 bench/diagnosis.py --build build [--reps 3] [--cases read,decompress]
                                      [--markdown table.md]
The data: Fashion-MNIST from Debian's dataset-fashion-mnist (sharded into a temporary folder)
and a folder of generated photo-like JPEGs (bench/photo_folder.py), ingested with
sluice-shard. Every run is sluice-train with --epochs 1 on Fashion-MNIST (60,000 samples) and
--epochs 4 on the JPEG folder (1,500 photos: one epoch lasts about 0.15 s, and its start-up, the
first frames read, decompressed and paged in, was a tenth of it); a case's flags are printed
with it.
"""
import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photo_folder  # noqa: E402

FASHION = "/usr/share/datasets/fashion-mnist"


class Case:
    """A planted bottleneck: the data, sluice-train's flags, the stage the report should name,
    and the stage a what-if run frees (None: the case has no what-if)."""

    def __init__(self, name, data, flags, expected, free=None, what="", python_step_us=0,
                 probe_sample_us=0, ranks=0):
        self.name, self.data, self.flags = name, data, flags
        self.expected, self.free, self.what = expected, free, what
        self.python_step_us = python_step_us  # > 0: a sluice.Loader loop with this step
        self.probe_sample_us = probe_sample_us  # > 0: sluice.probe around a slow DataLoader
        self.ranks = ranks  # > 0: sluice-train under mpirun with this many ranks


CASES = [
    Case("read", "fm", ["--inject-delay=read:6000"], "read", "read",
         "the reader sleeps 6 ms per frame (I/O latency)"),
    Case("object-store", "fm-remote", ["--read-concurrency=2", "--cache-bytes=0"], "read", "read",
         "the dataset over HTTP from nginx behind a proxy adding 20 ms to each request, 2 "
         "requests in flight"),
    Case("object-store-bandwidth", "fm-remote-capped", ["--read-concurrency=2",
                                                        "--cache-bytes=0"], "read", "read",
         "the dataset over HTTP from nginx behind a proxy capping the total rate at 10 MB/s, 2 "
         "requests in flight: bandwidth-bound, so no more concurrency is advised"),
    Case("decompress", "fm", ["--inject-delay=decompress:8000"], "decompress", "decompress",
         "decompress spins 8 ms per frame on its 2 threads: it holds the cores"),
    Case("preprocess", "fm", ["--inject-delay=preprocess:1200"], "preprocess", "preprocess",
         "preprocess spins 1.2 ms per batch"),
    Case("decode", "jpeg", ["--transforms=DecodeImage(), CenterCrop(32)", "--layers=3072,128,10",
                            "--inject-delay=decode:400"], "decode", "decode",
         "each JPEG decode spins 0.4 ms more"),
    Case("cpu-compute", "fm", ["--inject-delay=compute:300"], "compute", "compute",
         "the CPU step spins 0.3 ms more"),
    Case("sim-link", "fm", ["--device=sim", "--sim-link-gbps=0.05"], "h2d", "h2d",
         "a 50 MB/s simulated link"),
    Case("sim-compute", "fm", ["--device=sim", "--sim-compute-us=2000"], "compute", "compute",
         "a simulated device step of 2 ms"),
    Case("one-preprocess-thread", "jpeg",
         ["--transforms=DecodeImage(), CenterCrop(32)", "--layers=3072,128,10",
          "--preprocess-threads=1"], "decode",
         "decode", "JPEG decoding on one preprocess thread of 2 cores"),
    Case("one-decompress-thread", "fm", ["--decompress-threads=1",
                                         "--inject-delay=decompress:6000"],
         "decompress", "decompress", "decompress spins 6 ms per frame on one thread of 2 cores"),
    Case("one-preprocess-thread-fm", "fm", ["--preprocess-threads=1",
                                            "--inject-delay=preprocess:600"],
         "preprocess", "preprocess", "preprocess spins 0.6 ms per batch on one thread of 2 cores"),
    Case("sim-preprocess-f32", "fm", ["--device=sim", "--preprocess-threads=1", "--h2d-format=f32",
                                      "--inject-delay=preprocess:600"],
         "preprocess", "preprocess",
         "f32 batches to a simulated device; preprocess spins 0.6 ms per batch on one thread"),
    Case("transforms", "fm", ["--transforms=Resize(224), CenterCrop(28)"], "preprocess",
         "transforms", "the transform chain upscales each 28 px image 8x and crops it back"),
    Case("sim-ring", "fm", ["--device=sim", "--device-ring-depth=2", "--sim-latency-us=3000",
                            "--sim-compute-us=1000"], "h2d", "h2d",
         "two device slots, each copy 3 ms late, a 1 ms simulated step"),
    Case("python-step", "fm", [], "compute", None,
         "a Python training step that spins 1 ms per batch of 32 (sluice.Loader)",
         python_step_us=1000),
    Case("probe", "fm", [], "loader", None,
         "sluice.probe around a DataLoader whose dataset spins 0.2 ms per sample",
         probe_sample_us=200),
    Case("mpi-exchange", "fm", ["--layers=784,4096,10", "--batch-size=64", "--threads=1",
                                "--stop-after-steps=150"], "exchange", None,
         "2 ranks exchanging a 13 MB gradient per step of 64 samples", ranks=2),
]


def run(cmd, timeout=600):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit("failed (exit %d): %s\n%s" % (done.returncode, shlex.join(cmd),
                                                       done.stderr[-2000:]))
    return done


def prepare_data(args, work):
    shard = os.path.join(args.build, "tools", "sluice-shard")
    data = {}
    fm = os.path.join(work, "fm")
    for split, prefix in (("train", "train"), ("test", "t10k")):
        run([shard, "create", "--images", "%s/%s-images-idx3-ubyte.gz" % (FASHION, prefix),
             "--labels", "%s/%s-labels-idx1-ubyte.gz" % (FASHION, prefix), "--out", fm,
             "--split", split, "--quiet"])
    data["fm"] = fm
    folder = os.path.join(work, "photos")
    photo_folder.write_photo_folder(folder, args.images, 10, seed=0, min_side=96, max_side=256)
    jpeg = os.path.join(work, "jpeg")
    run([shard, "create", "--image-folder", folder, "--out", jpeg, "--quiet"])
    data["jpeg"] = jpeg
    return data


# Epochs per data set (its folder's name, "jpeg-half" included): enough that a run is mostly
# steady state (see the module docstring).
EPOCHS = {"fm": 1, "jpeg": 4}


def train(args, data, flags, report):
    name = os.path.basename(data.rstrip("/"))
    cmd = [os.path.join(args.build, "tools", "sluice-train"), "--data", data, "--epochs",
           str(EPOCHS[name.split("-")[0]]),
           "--batch-size", "32", "--device=cpu", "--quiet",
           "--report-json", report] + flags
    run(cmd)
    with open(report) as f:
        return json.load(f)


PYTHON_STEP = """
import json, sys, time
import sluice
data, out, step_us = sys.argv[1], sys.argv[2], float(sys.argv[3])
loader = sluice.Loader(data, batch_size=32)
for x, y in loader:
    end = time.perf_counter() + step_us / 1e6
    while time.perf_counter() < end:
        pass
with open(out, "w") as f:
    json.dump(loader.report(), f)
"""


PROBE = """
import json, sys, time
import torch
import sluice
out, sample_us = sys.argv[1], float(sys.argv[2])
torch.set_num_threads(1)


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 3200

    def __getitem__(self, i):
        end = time.perf_counter() + sample_us / 1e6
        while time.perf_counter() < end:
            pass
        return torch.zeros(784), i % 10


model = torch.nn.Linear(784, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(x, y):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


p = sluice.probe(torch.utils.data.DataLoader(Slow(), batch_size=32))
for x, y in p:
    step(x, y)
for x, y in p.replay(steps=50):
    step(x, y)
with open(out, "w") as f:
    json.dump(p.report(), f)
"""


def probe_python(args, sample_us, report):
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
    done = subprocess.run(["/usr/bin/python3", "-c", PROBE, report, str(sample_us)],
                          capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise SystemExit("probe failed: %s" % done.stderr[-2000:])
    with open(report) as f:
        return json.load(f)


def train_mpi(args, data, ranks, flags, report):
    cmd = ["mpirun", "-np", str(ranks), "--allow-run-as-root", "--oversubscribe", "--mca",
           "btl_vader_single_copy_mechanism", "none",
           os.path.join(args.build, "tools", "sluice-train"), "--data", data, "--epochs", "1",
           "--device=cpu", "--quiet", "--report-json", report] + flags
    run(cmd)
    with open(report) as f:
        return json.load(f)


def train_python(args, data, step_us, report):
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
    done = subprocess.run(["/usr/bin/python3", "-c", PYTHON_STEP, data, report, str(step_us)],
                          capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise SystemExit("python step failed: %s" % done.stderr[-2000:])
    with open(report) as f:
        return json.load(f)


def half_side_data(args, data, key, work):
    """The dataset of `key` with every image at half its side (the image-side advice), made
    once: the photo folder resized with PIL and ingested again."""
    if key + "-half" in data:
        return data[key + "-half"]
    from PIL import Image
    src, dst = os.path.join(work, "photos"), os.path.join(work, "photos-half")
    for path in photo_folder.folder_files(src):
        out = os.path.join(dst, os.path.relpath(path, src))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with Image.open(path) as im:
            im.resize((max(1, im.width // 2), max(1, im.height // 2)), Image.BILINEAR).save(
                out, quality=90, subsampling="4:2:0")
    shards = os.path.join(work, key + "-half")
    run([os.path.join(args.build, "tools", "sluice-shard"), "create", "--image-folder", dst,
         "--out", shards, "--quiet"])
    data[key + "-half"] = shards
    return shards


def if_free(report, stage):
    for e in report.get("model", {}).get("if_free", []):
        if e["stage"] == stage:
            return e["samples_per_s"]
    return None


def error(predicted, measured):
    return abs(predicted - measured) / measured if measured > 0 and predicted else None


def run_case(args, case, data, work):
    reps = []
    for rep in range(args.reps):
        path = os.path.join(work, "%s-%d.json" % (case.name, rep))
        if case.python_step_us:
            r = train_python(args, data[case.data], case.python_step_us, path)
        elif case.probe_sample_us:
            r = probe_python(args, case.probe_sample_us, path)
        elif case.ranks:
            r = train_mpi(args, data[case.data], case.ranks, case.flags, path)
        else:
            r = train(args, data[case.data], case.flags, path)
        one = {"stage": r["verdict"]["limiting_stage"], "class": r["verdict"]["class"],
               "measured": r["measured_samples_per_s"],
               "predicted": r["predicted_samples_per_s"], "advice": []}
        if case.free:
            freed = train(args, data[case.data], case.flags + ["--what-if=" + case.free],
                          path + ".free")
            one["free_measured"] = freed["measured_samples_per_s"]
            one["free_predicted"] = if_free(r, case.free)
        for a in r["verdict"]["advice"]:
            if a["setting"] == "image-side" and case.data == "jpeg" and a["value"] == "0.5":
                after = train(args, half_side_data(args, data, case.data, work), case.flags,
                              path + ".advice")
            elif (a.get("kind") == "data" or case.python_step_us or case.probe_sample_us
                  or case.ranks):  # not made by this script
                one["advice"].append((a["text"], None, a.get("predicted_speedup")))
                continue
            else:
                after = train(args, data[case.data], case.flags + [a["text"]], path + ".advice")
            one["advice"].append((a["text"], after["measured_samples_per_s"] / one["measured"],
                                  a.get("predicted_speedup")))
        if case.probe_sample_us:
            # A probe's predicted rate is the free-data bound (the replay), not this run's; this
            # case does not call measure_switch (bench/probe_switch.py checks the switch).
            one["predicted"] = None
        reps.append(one)
        print("  rep %d: %s (%s), measured %.0f, predicted %s%s" % (
            rep + 1, one["stage"], one["class"], one["measured"],
            "%.0f" % one["predicted"] if one["predicted"] else "-",
            "" if not case.free else ", freed measured %.0f predicted %s" % (
                one["free_measured"], "%.0f" % one["free_predicted"]
                if one["free_predicted"] else "-")), flush=True)
    return reps


def summarize(case, reps):
    named = sum(r["stage"] == case.expected for r in reps)
    stable = len({(r["stage"], r["class"]) for r in reps}) == 1
    errors = [e for r in reps for e in [error(r["predicted"], r["measured"])] if e is not None]
    free_errors = [e for r in reps if case.free
                   for e in [error(r.get("free_predicted"), r.get("free_measured", 0))]
                   if e is not None]
    gains = [(text, g, p) for r in reps for (text, g, p) in r["advice"]]
    return {"case": case.name, "what": case.what, "flags": " ".join(case.flags),
            "expected": case.expected, "named": "%d/%d" % (named, len(reps)),
            "named_all": named == len(reps), "stable": stable,
            "stages": ",".join(sorted({r["stage"] for r in reps})),
            "error": statistics.median(errors) if errors else None,
            "free_error": statistics.median(free_errors) if free_errors else None,
            "advice": gains}


def markdown(rows, seconds):
    out = ["| case | planted | named (right/reps) | stable | predicted vs measured | "
           "freed: predicted vs measured | advice: measured gain |", "|---|---|---|---|---|---|---|"]
    for s in rows:
        adv = "; ".join("%s %s (predicted %s)" % (
            t, "%.2fx" % g if g else "not rerun", "%.2fx" % p if p else "-")
            for t, g, p in s["advice"]) or "none"
        out.append("| %s | %s (`%s`) | %s %s | %s | %s | %s | %s |" % (
            s["case"], s["what"], s["flags"], s["named"], s["stages"],
            "yes" if s["stable"] else "no",
            "%.1f%%" % (100 * s["error"]) if s["error"] is not None else "-",
            "%.1f%%" % (100 * s["free_error"]) if s["free_error"] is not None else "-", adv))
    errors = [s["error"] for s in rows if s["error"] is not None] + \
             [s["free_error"] for s in rows if s["free_error"] is not None]
    gains = [g for s in rows for _, g, _ in s["advice"] if g]
    # An advice entry's prediction is of a run not yet made: its rate is run 1's times the
    # predicted speedup, against the rate measured with the change.
    errors += [abs(p - g) / g for s in rows for _, g, p in s["advice"] if g and p]
    with_advice = sum(any(g for _, g, _ in s["advice"]) for s in rows)
    out.append("")
    out.append("Named right and stable: %d of %d cases. Median |predicted - measured| / measured "
               "over the runs, the freed runs and the advice reruns: %s. Cases with a measured "
               "advice entry: %d. Advice entries measured: %d, of which >= 1.05x: %d. Wall "
               "time: %.0f s." % (
                   sum(s["named_all"] and s["stable"] for s in rows), len(rows),
                   "%.1f%%" % (100 * statistics.median(errors)) if errors else "-", with_advice,
                   len(gains), sum(g >= 1.05 for g in gains), seconds))
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--images", type=int, default=1500, help="generated JPEGs for the jpeg cases")
    p.add_argument("--markdown", default="", help="also write the table to this file")
    args = p.parse_args()
    wanted = [c for c in CASES if not args.cases or c.name in args.cases.split(",")]
    if not wanted:
        raise SystemExit("--cases: none of %s" % ", ".join(c.name for c in CASES))
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="sluice-diagnosis-") as work, \
            contextlib.ExitStack() as servers:
        data = prepare_data(args, work)
        if any(c.data.startswith("fm-remote") for c in wanted):
            # The Fashion-MNIST dataset from a web server on 127.0.0.1 behind a delaying proxy
            # (python/tests/object_servers.py): an object store's latency.
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                            "python", "tests"))
            import object_servers
            web = servers.enter_context(object_servers.nginx_server(work, work))
            proxy = servers.enter_context(
                object_servers.delay_proxy("127.0.0.1", web.port, delay_s=0.02))
            data["fm-remote"] = proxy.url + "/fm"
            capped = servers.enter_context(
                object_servers.delay_proxy("127.0.0.1", web.port, delay_s=0.0, bytes_per_s=10e6))
            data["fm-remote-capped"] = capped.url + "/fm"
        rows = []
        for case in wanted:
            print("%s: %s" % (case.name, " ".join(case.flags)), flush=True)
            rows.append(summarize(case, run_case(args, case, data, work)))
    table = markdown(rows, time.time() - start)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
