"""sluice's pipeline on encoded JPEGs against its decode limit (issue 23's first benchmark).

    PYTHONPATH=build/python /usr/bin/python3 bench/images_vs_decode_limit.py \
        [--images 2000] [--classes 10] [--seed 0] [--folder DIR] [--batch-size 256] \
        [--threads N] [--rounds 5] [--min-decode-seconds 2] \
        [--sluice-shard build/tools/sluice-shard]

Data: --images photo-like JPEGs of 128-512 px per side, quality 90, 4:2:0 (bench/photo_folder.py
says what they are), generated into a temporary ImageFolder, or the JPEGs of an existing
ImageFolder (--folder DIR). The folder is ingested with `sluice-shard create --image-folder`
(the files stored as they are) into a temporary dataset.

It measures, in one run:
- **The decode limit.** One core's bare libjpeg-turbo decode rate over the same files, times
  the usable cores (`len(os.sched_getaffinity(0))`). Bare decode is the TurboJPEG API called
  through ctypes on libturbojpeg.so.0 (the library sluice links): tjDecompressHeader3, then
  tjDecompress2 to TJPF_RGB (TJPF_GRAY for a grey JPEG) with flags 0, sluice's settings
  (docs/transforms.md, "Decoding"), into one preallocated buffer; checked once to give PIL's
  pixels for the first file (the run stops otherwise). The files' bytes are in memory;
  one thread decodes them in order, pass after pass, for at least --min-decode-seconds. ctypes
  costs about a microsecond a call, under 1 % of a decode of these sizes; it counts against the
  limit, so the ratio is if anything slightly favourable to the limit.
- **The pipeline's rate.** sluice.Loader(shuffle=True, threads=--threads (default: all usable
  cores), transforms=DecodeImage(), RandomResizedCrop(224), RandomHorizontalFlip(),
  Normalize(ImageNet mean, std)), float32 batches, an empty loop body: samples over the wall
  clock of one epoch. The loader is built once and iterated epoch after epoch, as a training
  loop does; its first epoch is a warm-up, not counted. The dataset was just written, so reads
  come from the page cache (warm epochs).
Each round measures the limit, then one epoch of the pipeline; the figures are medians over
--rounds. It prints both rates and the ratio pipeline / limit (issue 23's goal: at least 0.85).
Size: an epoch should last seconds, not milliseconds (a few thousand images): a
tiny folder measures the per-epoch start and drain more than the steady rate; a run
on 64 images only shows that the script works.
The limit assumes every usable core is free for the pipeline: on a machine other processes
share, it overstates what the pipeline can get (its one-core figure is measured on one thread),
so run it on an idle machine. With --threads N it also prints the ratio against one core x N
(e.g. --threads 1: the pipeline's one preprocess thread against one core's bare decode).
On a shared machine the rates swing with the other processes' load (the pipeline's threads
lose their cores while the one-thread decode keeps one), so it also prints CPU time per image,
which the load hardly moves: the bare decode's (the decoding thread's CPU time) and the
pipeline's (the whole process's CPU time over the epoch: every pipeline thread and Python,
divided by the samples); their ratio is the fraction of the decode limit the pipeline reaches
when it has every core to itself and CPU is what limits it.
Also printed: the pipeline's own preprocess cost per sample and the DecodeImage share of it,
from the loader's report (`stages[].cpu_ns_per_sample`, `stages[].ops`), beside the bare
decode time per image, so a gap can be told apart: decode slower inside the pipeline, or the
rest of the chain and the pipeline around it.
"""
import argparse
import ctypes
import io
import os
import statistics
import tempfile
import time

import numpy as np
from PIL import Image

import sluice
from sluice import transforms as T

import photo_folder

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TJPF_RGB, TJPF_GRAY, TJCS_GRAY = 0, 6, 2


class BareTurboJpeg:
    """tjDecompressHeader3 + tjDecompress2 (flags 0) through ctypes, into one buffer."""

    def __init__(self, max_pixels):
        tj = ctypes.CDLL("libturbojpeg.so.0")
        tj.tjInitDecompress.restype = ctypes.c_void_p
        tj.tjDecompressHeader3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong] + [
            ctypes.POINTER(ctypes.c_int)] * 4
        tj.tjDecompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong,
                                     ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                     ctypes.c_int, ctypes.c_int]
        tj.tjGetErrorStr2.argtypes = [ctypes.c_void_p]
        tj.tjGetErrorStr2.restype = ctypes.c_char_p
        tj.tjDestroy.argtypes = [ctypes.c_void_p]
        self.tj, self.handle = tj, tj.tjInitDecompress()
        self.out = ctypes.create_string_buffer(max_pixels * 3)
        self.w, self.h, self.sub, self.cs = (ctypes.c_int() for _ in range(4))

    def decode(self, data, name):
        tj, handle = self.tj, self.handle
        if tj.tjDecompressHeader3(handle, data, len(data), ctypes.byref(self.w),
                                  ctypes.byref(self.h), ctypes.byref(self.sub),
                                  ctypes.byref(self.cs)) != 0:
            reason = tj.tjGetErrorStr2(handle).decode()
            raise SystemExit("%s: not a JPEG libjpeg-turbo reads: %s (the decode limit is "
                             "measured on JPEG files only)" % (name, reason))
        if self.w.value * self.h.value * 3 > len(self.out):
            self.out = ctypes.create_string_buffer(self.w.value * self.h.value * 3)
        pf = TJPF_GRAY if self.cs.value == TJCS_GRAY else TJPF_RGB
        if tj.tjDecompress2(handle, data, len(data), self.out, self.w.value, 0, self.h.value,
                            pf, 0) != 0:
            reason = tj.tjGetErrorStr2(handle).decode()
            raise SystemExit("%s: tjDecompress2: %s" % (name, reason))

    def pixels(self):
        """The last decode's pixels, (H, W, C) uint8."""
        h, w = self.h.value, self.w.value
        c = 1 if self.cs.value == TJCS_GRAY else 3
        return np.frombuffer(self.out, np.uint8, h * w * c).reshape(h, w, c)

    def close(self):
        self.tj.tjDestroy(self.handle)


def check_against_pil(decoder, file):
    """Exits unless the bare decode gives PIL's pixels: the limit must time a whole decode."""
    name, data = file
    decoder.decode(data, name)
    with Image.open(io.BytesIO(data)) as im:
        expected = np.asarray(im.convert("L" if decoder.cs.value == TJCS_GRAY else "RGB"))
    if not np.array_equal(decoder.pixels().reshape(expected.shape), expected):
        raise SystemExit("%s: the bare TurboJPEG decode differs from PIL's; the decode limit "
                         "would not time what the pipeline decodes" % name)


def bare_decode_rate(decoder, files, min_seconds):
    """(images per second, CPU seconds per image) of one thread decoding `files`
    ([(name, bytes)]) pass after pass."""
    images, start, cpu_start = 0, time.perf_counter(), time.thread_time()
    while True:
        for name, data in files:
            decoder.decode(data, name)
        images += len(files)
        seconds = time.perf_counter() - start
        if seconds >= min_seconds:
            return images / seconds, (time.thread_time() - cpu_start) / images


def pipeline_epoch(loader):
    """Samples/s of one epoch; the process's CPU seconds per sample over it (every thread:
    the pipeline's and Python's); the preprocess row's ns/sample and DecodeImage's share (%)."""
    samples, start, cpu_start = 0, time.perf_counter(), time.process_time()
    for images, _ in loader:
        samples += images.shape[0]
    rate = samples / (time.perf_counter() - start)
    cpu = (time.process_time() - cpu_start) / samples
    pre = {s["stage"]: s for s in loader.report()["stages"]}["preprocess"]
    decode_share = next((o["share_pct"] for o in pre.get("ops") or []
                         if o["op"].startswith("DecodeImage")), float("nan"))
    return rate, cpu, pre["cpu_ns_per_sample"], decode_share


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    photo_folder.add_arguments(p)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=None,
                   help="the Loader's threads (default: all usable cores)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-decode-seconds", type=float, default=2.0)
    args = p.parse_args()
    cores = len(os.sched_getaffinity(0))
    chain = [T.DecodeImage(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
             T.Normalize(MEAN, STD)]
    with tempfile.TemporaryDirectory() as workdir:
        folder, paths, dataset = photo_folder.prepare(args, workdir)
        print("images: %s (%s)" % (photo_folder.describe(paths),
                                   "generated" if args.folder is None else folder), flush=True)
        files = []
        for path in paths:
            with open(path, "rb") as f:
                files.append((path, f.read()))
        decoder = BareTurboJpeg(512 * 512)
        # work_ahead=False: the bare decode runs between the Loader's epochs, and a Loader that
        # works ahead would do much of its next epoch then, outside its timed epoch.
        loader = sluice.Loader(dataset, args.batch_size, shuffle=True, threads=args.threads,
                               transforms=chain, work_ahead=False)
        bare_decode_rate(decoder, files, 0)  # warm-up: code, buffer and file bytes touched
        check_against_pil(decoder, files[0])
        pipeline_epoch(loader)  # warm-up epoch: pipeline threads and buffers starting
        rows = []
        for r in range(args.rounds):
            one_core, bare_cpu = bare_decode_rate(decoder, files, args.min_decode_seconds)
            rate, cpu, pre_ns, decode_share = pipeline_epoch(loader)
            rows.append((one_core, rate, pre_ns, decode_share, bare_cpu, cpu))
            print("round %d: bare decode %.0f images/s on one core (limit %.0f on %d cores); "
                  "pipeline %.0f samples/s (%.3f of the limit); preprocess %.0f ns/sample, "
                  "DecodeImage %.1f %% of it; CPU per image: bare decode %.0f us, pipeline "
                  "%.0f us (%.3f)"
                  % (r, one_core, one_core * cores, cores, rate, rate / (one_core * cores),
                     pre_ns, decode_share, bare_cpu * 1e6, cpu * 1e6, bare_cpu / cpu),
                  flush=True)
        decoder.close()
    one_core, rate, pre_ns, decode_share, bare_cpu, cpu = (statistics.median(c)
                                                           for c in zip(*rows))
    limit = one_core * cores
    print("medians over %d rounds: decode limit %.0f images/s (%.0f/s x %d cores, %.0f ns per "
          "bare decode); pipeline %.0f samples/s (threads=%s): %.3f of the limit (goal >= 0.85); "
          "in the pipeline DecodeImage takes %.0f ns/sample of preprocess's %.0f"
          % (len(rows), limit, one_core, cores, 1e9 / one_core, rate,
             "all" if args.threads is None else args.threads, rate / limit,
             pre_ns * decode_share / 100, pre_ns))
    print("CPU time per image (load-insensitive): bare decode %.0f us, the pipeline %.0f us "
          "(all its threads and Python's): %.3f, the fraction of the decode limit the pipeline "
          "reaches when it has every core to itself and CPU is its only limit"
          % (bare_cpu * 1e6, cpu * 1e6, bare_cpu / cpu))
    if args.threads is not None:
        print("against one core x --threads (%d): %.3f" % (args.threads,
                                                          rate / (one_core * args.threads)))


if __name__ == "__main__":
    main()
