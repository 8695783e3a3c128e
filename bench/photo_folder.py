"""A folder of photo-like JPEGs in torchvision's ImageFolder layout, and its shard dataset: the
input both encoded-image benchmarks (images_vs_decode_limit.py, images_vs_imagefolder.py) share.

What the images are (synthetic, seeded; no real photos ship with the repository): each is
H x W with H and W drawn independently and uniformly in [--min-side, --max-side] (default 128
to 512 px). The picture is a linear colour gradient in a random direction, a low-frequency
colour wave over it, 4 to 12 filled ellipses, rectangles and triangles in random colours,
softened by a Gaussian blur (radius 1.5, so edges are soft as a lens makes them), then a grey
texture (a Gaussian random field at a quarter of the resolution, bilinearly upscaled, amplitude
25) and sensor-like Gaussian noise (sigma 6). Saved by PIL as baseline JPEG, quality 90, 4:2:0
chroma subsampling (what cameras and ImageNet use). Image i of the folder is a pure function of
(--seed, i); it goes into class folder class_<i mod --classes>. The benchmarks print the mean
size in bytes per pixel (about 0.3 for these), to compare with the photos one cares about:
real photos vary with their detail, and decode time grows with the bytes as well as the pixels.

A real ImageFolder (e.g. a slice of ImageNet) can be given instead with --folder DIR.
"""
import os
import subprocess

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


def photo(rng, min_side, max_side):
    h, w = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    t = (x * np.cos(angle) + y * np.sin(angle)) / max(h, w)
    a, b = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    px = a + (b - a) * t[..., None]
    period = rng.uniform(40, 160)
    px += 30 * np.sin(x[..., None] / period + rng.uniform(0, 6, 3)) * np.cos(
        y[..., None] / period * 0.7 + rng.uniform(0, 6, 3))
    img = Image.fromarray(np.clip(px, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(4, 13))):
        x0, x1 = sorted(rng.integers(0, w, 2).tolist())
        y0, y1 = sorted(rng.integers(0, h, 2).tolist())
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        kind = int(rng.integers(0, 3))
        if kind == 0:
            draw.ellipse([x0, y0, x1, y1], fill=colour)
        elif kind == 1:
            draw.rectangle([x0, y0, x1, y1], fill=colour)
        else:
            draw.polygon([(x0, y1), (x1, y1), ((x0 + x1) // 2, y0)], fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(1.5))
    # Texture (foliage, fabric, skin): a grey random field at a quarter of the resolution,
    # bilinearly upscaled; without it the JPEGs are far smaller per pixel than photos.
    coarse = rng.normal(0, 1, ((h + 3) // 4, (w + 3) // 4)).astype(np.float32)
    texture = np.asarray(Image.fromarray(coarse, mode="F").resize((w, h), Image.BILINEAR))
    noisy = (np.asarray(img, dtype=np.float32) + 25 * texture[..., None] +
             rng.normal(0, 6, (h, w, 3)))
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def write_photo_folder(folder, images, classes, seed=0, min_side=128, max_side=512):
    """Writes `images` JPEGs into folder/class_KK/NNNNNNN.jpg; returns their paths."""
    paths = []
    for c in range(classes):
        os.makedirs(os.path.join(folder, "class_%02d" % c), exist_ok=True)
    for i in range(images):
        rng = np.random.default_rng([seed, i])
        path = os.path.join(folder, "class_%02d" % (i % classes), "%07d.jpg" % i)
        photo(rng, min_side, max_side).save(path, quality=90, subsampling="4:2:0")
        paths.append(path)
    return paths


def folder_files(folder):
    """Every file of an ImageFolder, in ImageFolder's order (classes and names sorted)."""
    paths = []
    for cls in sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d))):
        for name in sorted(os.listdir(os.path.join(folder, cls))):
            paths.append(os.path.join(folder, cls, name))
    return paths


def describe(paths):
    """'N files, X MB, mean WxH, B bytes/pixel' for the JPEGs/PNGs at paths."""
    total_bytes, total_pixels, sides = 0, 0, []
    for p in paths:
        with Image.open(p) as im:
            w, h = im.size
        total_bytes += os.path.getsize(p)
        total_pixels += w * h
        sides.append((w, h))
    mean_w = sum(s[0] for s in sides) / len(sides)
    mean_h = sum(s[1] for s in sides) / len(sides)
    return ("%d files, %.1f MB, mean %.0fx%.0f px (w x h), %.2f bytes/pixel"
            % (len(paths), total_bytes / 1e6, mean_w, mean_h, total_bytes / total_pixels))


def ingest(sluice_shard, folder, out):
    """`sluice-shard create --image-folder folder --out out --quiet`; raises on failure."""
    if not os.access(sluice_shard, os.X_OK):
        raise SystemExit("--sluice-shard %s: no such executable (build it: cmake --build build "
                         "--target sluice-shard)" % sluice_shard)
    cmd = [sluice_shard, "create", "--image-folder", folder, "--out", out, "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("%s failed (exit %d): %s" % (" ".join(cmd), done.returncode,
                                                      done.stderr.strip()))


def add_arguments(p):
    p.add_argument("--images", type=int, default=2000,
                   help="photos to generate (ignored with --folder)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0, help="the photos' seed")
    p.add_argument("--folder", default=None,
                   help="an existing ImageFolder to use instead of generated photos")
    p.add_argument("--sluice-shard", default="build/tools/sluice-shard",
                   help="the sluice-shard binary")


def prepare(args, workdir):
    """The ImageFolder (generated under workdir unless --folder) and its ingested dataset."""
    folder = args.folder
    if folder is not None and not os.path.isdir(folder):
        raise SystemExit("--folder %s: not a directory (an ImageFolder expected)" % folder)
    if folder is None:
        folder = os.path.join(workdir, "photos")
        write_photo_folder(folder, args.images, args.classes, args.seed)
    paths = folder_files(folder)
    if not paths:
        raise SystemExit("--folder %s: no class subfolders with files (ImageFolder layout "
                         "expected)" % folder)
    dataset = os.path.join(workdir, "dataset")
    ingest(args.sluice_shard, folder, dataset)
    return folder, paths, dataset
