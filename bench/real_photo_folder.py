"""A folder of real photographs in torchvision's ImageFolder layout, cut from the photographic
wallpapers Debian's plasma-workspace-wallpapers package ships (`apt-get install
plasma-workspace-wallpapers`; about 94 MB, not a dependency of the build or the tests).

What the images are: 11 photographs of 2560x1600 px (SOURCES: a pier in fog, boats at sunset,
a forest path, autumn leaves, cups, a concrete facade, sky, ...), real camera content with its
noise, blur and flat regions. Image i is cut from source i mod 11: an output size H x W with
each side uniform in [min_side, max_side], a region of that aspect ratio at a uniform scale
between 1x and the largest that fits (so some images are 1:1 detail, others the whole scene
downscaled), at a uniform position, resized with PIL's LANCZOS filter and saved by PIL as
baseline JPEG, quality 90, 4:2:0, as a camera pipeline would. Image i is a pure function of
(seed, i); it goes into class folder class_<i mod classes>.
"""
import os

import numpy as np
from PIL import Image

WALLPAPERS = "/usr/share/wallpapers"
SOURCES = ["BytheWater", "ColdRipple", "ColorfulCups", "DarkestHour", "EveningGlow", "FallenLeaf",
           "Grey", "Kite", "OneStandsOut", "Path", "summer_1am"]


def source_paths():
    """The 11 photographs' largest JPEGs; SystemExit saying what to install if absent."""
    paths = []
    for name in SOURCES:
        images = os.path.join(WALLPAPERS, name, "contents", "images")
        jpegs = sorted(f for f in os.listdir(images) if f.endswith(".jpg")) if os.path.isdir(
            images) else []
        if not jpegs:
            raise SystemExit("%s: no photograph there; install Debian's plasma-workspace-wallpapers "
                             "(apt-get install plasma-workspace-wallpapers)" % images)
        largest = max(jpegs, key=lambda f: int(f.split("x")[0]) * int(f.split("x")[1][:-4]))
        paths.append(os.path.join(images, largest))
    return paths


def write_real_photo_folder(folder, images, classes, seed, min_side, max_side):
    """Writes the folder (see the module's docstring); returns the files' paths in order."""
    sources = [Image.open(p).convert("RGB") for p in source_paths()]
    for c in range(classes):
        os.makedirs(os.path.join(folder, "class_%02d" % c), exist_ok=True)
    paths = []
    for i in range(images):
        rng = np.random.default_rng([seed, i])
        src = sources[i % len(sources)]
        h, w = (int(v) for v in rng.integers(min_side, max_side + 1, size=2))
        most = min(src.width / w, src.height / h)
        scale = rng.uniform(1.0, most) if most > 1 else most
        rw, rh = max(1, int(round(w * scale))), max(1, int(round(h * scale)))
        left = int(rng.integers(0, src.width - rw + 1))
        top = int(rng.integers(0, src.height - rh + 1))
        cut = src.crop((left, top, left + rw, top + rh)).resize((w, h), Image.LANCZOS)
        path = os.path.join(folder, "class_%02d" % (i % classes), "%07d.jpg" % i)
        cut.save(path, quality=90, subsampling="4:2:0")
        paths.append(path)
    return paths
