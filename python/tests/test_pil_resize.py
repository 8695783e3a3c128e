"""Resize and RandomResizedCrop with antialias=True: PIL's resampling, bitwise equal to what
torchvision's Resize and RandomResizedCrop give on PIL images (Pillow 9.4, torchvision 0.14), on
JPEGs of every colour kind and on PNGs (docs/transforms.md, "PIL or tensor semantics"); and the
position rule that gives torchvision's own objects the semantics they had in the user's list."""
import io
import re
import json

import numpy as np
import pytest
import torch
import torchvision.transforms as TV
from PIL import Image

import sluice
import sluice.transforms as T
from sluice import _sluice

from test_decode_oracle import photo


def decode(chain, data, index=0):
    return _sluice._decode_transforms(chain, data, seed=7, epoch=0, index=index, max_side=700)


def encoded(image, fmt, **options):
    buf = io.BytesIO()
    image.save(buf, format=fmt, **options)
    return buf.getvalue()


def chw(image):
    a = np.asarray(image)
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def pil_of(data, mode="RGB"):
    return Image.open(io.BytesIO(data)).convert(mode)  # torchvision's ImageFolder loader


# Every JPEG colour kind DecodeImage takes (4:4:4, 4:2:2, 4:2:0, progressive, grey; CMYK is
# refused as a data error) and PNGs of every colour type.
KINDS = {
    "jpeg-444": lambda im: encoded(im, "JPEG", quality=92, subsampling=0),
    "jpeg-422": lambda im: encoded(im, "JPEG", quality=90, subsampling=1),
    "jpeg-420": lambda im: encoded(im, "JPEG", quality=75, subsampling=2),
    "jpeg-progressive": lambda im: encoded(im, "JPEG", quality=85, progressive=True),
    "jpeg-grey": lambda im: encoded(im.convert("L"), "JPEG", quality=90),
    "png-rgb": lambda im: encoded(im, "PNG"),
    "png-grey": lambda im: encoded(im.convert("L"), "PNG"),
    "png-palette": lambda im: encoded(im.quantize(colors=200), "PNG"),
    "png-rgba": lambda im: encoded(im.convert("RGBA"), "PNG"),
}
SHAPES = [(333, 500), (481, 203), (64, 64), (17, 9)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_resize_antialias_is_torchvision_on_pil_images_bitwise(kind):
    for seed, (h, w) in enumerate(SHAPES):
        data = KINDS[kind](Image.fromarray(photo(h, w, seed)))
        pil = pil_of(data)
        # Down on both axes, down on one and up on the other, up on both, unchanged.
        for size in [(64, 64), (h // 3 + 1, w * 2), (h * 2, w + 7), (h, w), (h, w // 2 + 1)]:
            ours = decode("DecodeImage(), Resize(%r, antialias=True)" % (size,), data)
            theirs = chw(TV.Resize(size)(pil))
            assert np.array_equal(ours, theirs), (kind, (h, w), size)
        # The smaller edge, then a centre crop (a validation chain): the whole image is resized.
        edge, crop = min(h, w, 72), min(h, w, 72) * 7 // 8
        ours = decode("DecodeImage(), Resize(%d, antialias=True), CenterCrop(%d)" % (edge, crop),
                      data)
        theirs = chw(TV.CenterCrop(crop)(TV.Resize(edge)(pil)))
        assert np.array_equal(ours, theirs), (kind, (h, w), edge)


@pytest.mark.parametrize("kind", ["jpeg-420", "jpeg-444", "jpeg-grey", "png-rgb", "png-rgba"])
def test_bicubic_resize_is_torchvision_bicubic_on_pil_images_bitwise(kind):
    # Keys' cubic (a = -0.5): negative weights, so sums clip at 0 and 255 as PIL's do.
    bicubic = TV.InterpolationMode.BICUBIC
    for seed, (h, w) in enumerate(SHAPES):
        data = KINDS[kind](Image.fromarray(photo(h, w, seed + 20)))
        pil = pil_of(data)
        for size in [(64, 64), (h * 2, w + 7), (h // 2 + 1, w * 3)]:
            ours = decode("DecodeImage(), Resize(%r, interpolation=bicubic, antialias=True)"
                          % (size,), data)
            assert np.array_equal(ours, chw(TV.Resize(size, bicubic)(pil))), (kind, (h, w), size)
    chain = T.chain_text([T.DecodeImage(), TV.RandomResizedCrop(
        (40, 56), scale=(1, 1), ratio=(w / h, w / h), interpolation=bicubic)])
    assert "interpolation=bicubic, antialias=True" in chain
    assert np.array_equal(decode(chain, data), chw(pil.resize((56, 40), Image.BICUBIC)))


def test_bicubic_is_refused_on_the_tensor_path():
    with pytest.raises(ValueError, match="bicubic with antialias=True"):
        T.Resize(8, interpolation="bicubic")
    with pytest.raises(ValueError, match="bicubic with antialias=True"):
        T.chain_text([TV.ToTensor(), TV.Resize(8, TV.InterpolationMode.BICUBIC)])
    with pytest.raises(ValueError, match="bicubic with antialias=True"):
        decode("DecodeImage(), Resize(8, interpolation=bicubic)", b"")


@pytest.mark.parametrize("kind", ["jpeg-420", "jpeg-grey", "png-rgb", "png-palette"])
def test_grey_output_resizes_as_pil_resizes_an_l_image(kind):
    data = KINDS[kind](Image.fromarray(photo(150, 210, 3)))
    ours = decode("DecodeImage(mode=L), Resize((50, 61), antialias=True)", data)
    assert np.array_equal(ours, chw(TV.Resize((50, 61))(pil_of(data, "L"))))


def _matching_offsets(ours, pil, h, w, size, flip):
    """The offsets (top, left) of an h x w window of `pil` that torchvision's resized_crop (and
    a flip) turns into `ours`, bitwise."""
    import torchvision.transforms.functional as F
    found = []
    for top in range(pil.height - h + 1):
        for left in range(pil.width - w + 1):
            theirs = F.resized_crop(pil, top, left, h, w, list(size))
            if flip:
                theirs = F.hflip(theirs)
            if np.array_equal(ours, chw(theirs)):
                found.append((top, left))
    return found


@pytest.mark.parametrize("kind", ["jpeg-420", "jpeg-444", "jpeg-grey", "png-rgb"])
@pytest.mark.parametrize("window_decode", ["1", "0"])
def test_random_resized_crop_antialias_is_a_pil_crop_then_pil_resize(kind, window_decode,
                                                                      monkeypatch):
    # A window of fixed sides (scale and ratio pinned) at an offset the draw picks: exactly the
    # PIL resize of one of the offsets, through the fused decode + crop + flip path, with and
    # without decoding only the window.
    monkeypatch.setenv("SLUICE_WINDOW_DECODE", window_decode)
    h, w = 46, 60
    data = KINDS[kind](Image.fromarray(photo(58, 75, 9)))
    pil = pil_of(data)
    ratio = w / h
    for index, (size, flip) in enumerate([((24, 32), False), ((40, 40), True), ((90, 70), False)]):
        chain = ("DecodeImage(), RandomResizedCrop(%r, scale=(%r, %r), ratio=(%r, %r), "
                 "antialias=True)" % (size, h * w / (58 * 75), h * w / (58 * 75), ratio, ratio))
        if flip:
            chain += ", RandomHorizontalFlip(p=1.0)"
        ours = decode(chain, data, index=index)
        assert len(_matching_offsets(ours, pil, h, w, size, flip)) >= 1, (kind, size, flip)


def test_random_resized_crop_of_the_whole_image_is_pils_resize():
    data = KINDS["jpeg-420"](Image.fromarray(photo(120, 160, 4)))
    chain = "DecodeImage(), RandomResizedCrop((50, 70), scale=(1, 1), ratio=(%r, %r), " \
            "antialias=True)" % (160 / 120, 160 / 120)
    assert np.array_equal(decode(chain, data), chw(pil_of(data).resize((70, 50), Image.BILINEAR)))


def test_torchvision_objects_take_the_semantics_of_their_place_in_the_list():
    # An ImageFolder list (no ToTensor), or before ToTensor/PILToTensor: PIL's resampling.
    assert T.chain_text([TV.Resize(72), TV.CenterCrop(64)]) == (
        "Resize(72, antialias=True), CenterCrop([64, 64])")
    assert T.chain_text(TV.Compose([TV.RandomResizedCrop(32), TV.RandomHorizontalFlip(),
                                    TV.ToTensor(), TV.Normalize((0.5,), (0.5,))])).startswith(
        "RandomResizedCrop([32, 32], scale=[0.08, 1.0], ratio=[0.75, 1.3333333333333333], "
        "antialias=True), RandomHorizontalFlip(")
    assert "antialias=True" in T.chain_text([TV.Resize((8, 8)), TV.PILToTensor()])
    # After ToTensor: the tensor path, as torchvision resizes a tensor, on ToTensor's floats
    # (x/255 first: a resize computes on values).
    assert T.chain_text([TV.ToTensor(), TV.Resize((8, 8))]) == (
        "Normalize(mean=[0.0], std=[1.0]), Resize([8, 8])")
    with pytest.raises(ValueError, match=r"antialias=True\) after ToTensor"):
        T.chain_text([TV.ToTensor(), TV.Resize((8, 8), antialias=True)])
    # sluice's own ops say which they are, wherever they stand.
    assert T.chain_text([T.Resize(8)]) == "Resize(8)"
    assert T.chain_text([T.Resize(8, antialias=True)]) == "Resize(8, antialias=True)"
    with pytest.raises(ValueError, match="antialias: expected True"):
        T.Resize(8, antialias="yes")


def test_antialias_needs_uint8_images():
    data = KINDS["jpeg-420"](Image.fromarray(photo(40, 40, 1)))
    with pytest.raises(ValueError, match=r"antialias=True\) resamples as PIL does, on 8-bit "
                                         r"images: expected uint8 input"):
        decode("DecodeImage(), ToDtype(f32), Resize(16, antialias=True)", data)


@pytest.fixture
def folder(tmp_path):
    """An ImageFolder of 24 JPEGs and PNGs of their own sizes in 3 classes, and its dataset."""
    rng = np.random.default_rng(5)
    for i in range(24):
        h, w = int(rng.integers(40, 140)), int(rng.integers(40, 140))
        d = tmp_path / "photos" / ("class_%d" % (i % 3))
        d.mkdir(parents=True, exist_ok=True)
        image = Image.fromarray(photo(h, w, i))
        if i % 4 == 3:
            image.save(d / ("%02d.png" % i))
        else:
            image.save(d / ("%02d.jpg" % i), quality=90)
    return tmp_path


def test_an_imagefolder_script_ported_gets_the_same_pixels(folder):
    # The user's validation transform, as written for ImageFolder, with DecodeImage before it.
    import torchvision.datasets as datasets
    transform = TV.Compose([TV.Resize(72), TV.CenterCrop(64), TV.PILToTensor()])
    reference = datasets.ImageFolder(str(folder / "photos"), transform=transform)
    data = [open(path, "rb").read() for path, _ in reference.samples]
    labels = np.array([label for _, label in reference.samples], dtype=np.uint8)
    sluice.write_dataset(folder / "data", "train", data, labels, classes=reference.classes)
    loader = sluice.Loader(str(folder / "data"), batch_size=8, dtype=torch.uint8,
                           transforms=[T.DecodeImage(), transform])
    # The class names and labels, as ImageFolder has them.
    assert loader.classes == reference.classes == ["class_0", "class_1", "class_2"]
    assert loader.class_to_idx == reference.class_to_idx
    assert sluice.Dataset(str(folder / "data")).class_to_idx == reference.class_to_idx
    # Records per class, index = label, as counted from ImageFolder's targets.
    counts = [reference.targets.count(k) for k in range(len(reference.classes))]
    assert loader.class_counts == sluice.Dataset(str(folder / "data")).class_counts == counts
    ours = torch.cat([x for x, _ in loader])
    theirs = torch.stack([reference[i][0] for i in range(len(reference))])
    assert ours.shape == theirs.shape
    assert torch.equal(ours, theirs)
    with pytest.raises(ValueError, match="PILToTensor gives the raw uint8 pixels"):
        sluice.Loader(str(folder / "data"), batch_size=8, transforms=[T.DecodeImage(), transform])


def test_a_loader_on_the_image_folder_itself_says_how_to_shard_it(folder):
    """The natural first try: the folder, not a dataset. The error says what to run."""
    with pytest.raises(FileNotFoundError, match=r"no \*\.manifest\.json .*shard it once "
                                                r"\(sluice-shard create --image-folder "):
        sluice.Loader(str(folder / "photos"), batch_size=8, transforms=[T.DecodeImage()])


def test_a_size_that_varies_is_refused_naming_the_manifests_largest_image(folder):
    import torchvision.datasets as datasets
    reference = datasets.ImageFolder(str(folder / "photos"))
    data = [open(path, "rb").read() for path, _ in reference.samples]
    labels = np.array([label for _, label in reference.samples], dtype=np.uint8)
    sluice.write_dataset(folder / "data", "train", data, labels, classes=reference.classes)
    bound = json.loads((folder / "data" / "train.manifest.json").read_text())["sample"]
    with pytest.raises(ValueError, match="sizes vary") as refused:
        sluice.Loader(str(folder / "data"), batch_size=8,
                      transforms=[T.DecodeImage(), TV.Resize(72), TV.ToTensor()])
    # Resize(72) of images at most max_height x max_width (139 px here), not of the 4096 px
    # bound a split without recorded sizes gets: its smaller edge 72, its larger at most 72 x
    # the largest aspect ratio.
    height, width = map(int, re.search(r"at most (\d+)x(\d+)", str(refused.value)).groups())
    assert 72 <= height <= 72 * max(bound["max_height"], bound["max_width"]) / 40 + 1
    assert "4096" not in str(refused.value)


def test_pad_flip_and_grayscale_in_an_imagefolder_chain_are_its_pixels(folder):
    """Issue 38's deterministic ops (p=1 for the random ones) in one ImageFolder chain over the
    folder's JPEGs and PNGs: the same uint8 pixels as torchvision on PIL images."""
    import torchvision.datasets as datasets
    transform = TV.Compose([TV.Pad((3, 1, 0, 2), padding_mode="reflect"),
                            TV.RandomVerticalFlip(p=1.0), TV.RandomGrayscale(p=1.0),
                            TV.Resize((40, 36)), TV.Grayscale(3), TV.PILToTensor()])
    reference = datasets.ImageFolder(str(folder / "photos"), transform=transform)
    data = [open(path, "rb").read() for path, _ in reference.samples]
    labels = np.array([label for _, label in reference.samples], dtype=np.uint8)
    sluice.write_dataset(folder / "data", "train", data, labels, classes=reference.classes)
    loader = sluice.Loader(str(folder / "data"), batch_size=8, dtype=torch.uint8,
                           transforms=[T.DecodeImage(), transform])
    ours = torch.cat([x for x, _ in loader])
    theirs = torch.stack([reference[i][0] for i in range(len(reference))])
    assert ours.shape == theirs.shape == (24, 3, 40, 36)
    assert torch.equal(ours, theirs)
