"""What ingestion's image checks cost: `sluice-shard create --image-folder` on the photo folder
of bench/photo_folder.py with the default structure check (--verify-images=structure) and with
a full decode of every file (--verify-images=decode), at each --threads given. Each setting
runs --repeats times, interleaved, into a fresh output directory; the best and median wall
times are printed, with files per second. The page cache is warm after the first run (the
folder is read before timing), so the figures are the checks' CPU cost plus the write.

    /usr/bin/python3 bench/ingest_checks.py --images 1000 --threads 1 2
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photo_folder  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    photo_folder.add_arguments(p)
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="sluice_ingest_checks_")
    try:
        folder = args.folder
        if folder is None:
            folder = os.path.join(work, "photos")
            photo_folder.write_photo_folder(folder, args.images, args.classes, args.seed)
        paths = photo_folder.folder_files(folder)
        print(photo_folder.describe(paths))
        for path in paths:  # warm the page cache
            with open(path, "rb") as f:
                f.read()
        times = {}
        for _ in range(args.repeats):
            for threads in args.threads:
                for mode in ("structure", "decode"):
                    out = os.path.join(work, "out")
                    shutil.rmtree(out, ignore_errors=True)
                    cmd = [args.sluice_shard, "create", "--image-folder", folder, "--out", out,
                           "--quiet", "--threads", str(threads), "--verify-images", mode]
                    start = time.perf_counter()
                    done = subprocess.run(cmd, capture_output=True, text=True)
                    elapsed = time.perf_counter() - start
                    if done.returncode != 0:
                        raise SystemExit("%s: %s" % (" ".join(cmd), done.stderr.strip()))
                    times.setdefault((threads, mode), []).append(elapsed)
        for (threads, mode), t in sorted(times.items()):
            print("threads %d, --verify-images=%-9s best %.3f s, median %.3f s (%.0f files/s)"
                  % (threads, mode, min(t), statistics.median(t), len(paths) / min(t)))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
