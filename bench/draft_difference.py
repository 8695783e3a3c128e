"""How far DecodeImage(draft=True)'s pixels are from the exact path's, on a folder of photos
(issue 36; docs/transforms.md, "Reduced-size decoding").

    PYTHONPATH=build/python /usr/bin/python3 bench/draft_difference.py FOLDER [--images 300]

For each chain, every JPEG of FOLDER (up to --images, in ImageFolder order) goes through it
twice, with DecodeImage() and with DecodeImage(draft=True), and the two uint8 outputs are
compared: the mean absolute difference per value (0-255 scale), its 99th percentile, the
largest, and the PSNR over all values. Chains: Resize(S), CenterCrop(S) for S = 224, 112, 64
(one geometry both ways: the same centred region, resized). RandomResizedCrop is left out: its
window is drawn from the reduced image's size, so the two paths crop different regions.

Both are also compared with torchvision's PIL path on the full decode (Image.open(f).convert(
"RGB"), T.Resize(S) with PIL's antialiasing, T.CenterCrop(S)): the reduced decode averages in
the DCT domain before the bilinear resize, while the exact path resizes the full image without
antialiasing, so part of their difference is the exact path's aliasing, not the draft's error.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import photo_folder  # noqa: E402
from sluice import _sluice  # noqa: E402

SIZES = [224, 112, 64]


def stats(diffs):
    d = np.concatenate(diffs)
    mse = float(np.mean(d.astype(np.float64) ** 2))
    psnr = 10 * math.log10(255 ** 2 / mse) if mse > 0 else float("inf")
    return "mean %.2f, 99th percentile %d, max %d, PSNR %.1f dB" % (
        d.mean(), np.percentile(d, 99), d.max(), psnr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder")
    p.add_argument("--images", type=int, default=300)
    args = p.parse_args()
    paths = [f for f in photo_folder.folder_files(args.folder)
             if f.lower().endswith((".jpg", ".jpeg"))][:args.images]
    if not paths:
        raise SystemExit("%s: no JPEGs in an ImageFolder layout" % args.folder)
    print("photos:", photo_folder.describe(paths))
    import torchvision.transforms as T
    from PIL import Image
    for size in SIZES:
        chain = "Resize(%d), CenterCrop(%d)" % (size, size)
        pil = T.Compose([T.Resize(size), T.CenterCrop(size)])
        between, exact_off, draft_off = [], [], []
        for index, path in enumerate(paths):
            data = open(path, "rb").read()
            exact, draft = (_sluice._decode_transforms(
                "DecodeImage(%s), %s" % (d, chain), data, seed=3, epoch=0, index=index,
                max_side=1024).astype(np.int16) for d in ("", "draft=True"))
            with Image.open(path) as im:
                ref = np.asarray(pil(im.convert("RGB"))).transpose(2, 0, 1).astype(np.int16)
            between.append(np.abs(exact - draft).ravel())
            exact_off.append(np.abs(exact - ref).ravel())
            draft_off.append(np.abs(draft - ref).ravel())
        print("%s: |draft - exact| %s" % (chain, stats(between)))
        print("  against torchvision's PIL path (antialiased): exact %s; draft %s"
              % (stats(exact_off), stats(draft_off)))

if __name__ == "__main__":
    main()
