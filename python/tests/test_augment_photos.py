"""Every augmentation op of issue 38 in one chain over a folder of real photographs, against
torchvision 0.14 (docs/transforms.md, "Compared with torchvision").

The folder: JPEGs cut from the photographs of Debian's plasma-workspace-wallpapers (real camera
content: noise, blur, flat sky; bench/real_photo_folder.py), 200-320 px. The chain is an
ImageFolder recipe written with torchvision's own objects, so the ops before ToTensor take PIL's
semantics and the ones after it the tensor's, as in the user's script. For each image sluice
decodes and transforms the JPEG and reports what each op drew (`_transform_draws`); torchvision's
functional ops, run on the PIL image with those draws, must give the same batch: bit for bit,
except where GaussianBlur was chosen (a float convolution: u8 values 1 apart on a few pixels,
measured in test_gaussian_blur.py), bounded here by one level over the std."""
import json
import os
import sys

import numpy as np
import pytest
import torch
import torchvision.transforms as TV
import torchvision.transforms.functional as F
from PIL import Image

from sluice import _sluice
from sluice import transforms as T

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
import real_photo_folder  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
NAMES = ("brightness", "contrast", "saturation", "hue")
ADJUST = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)

RECIPE = TV.Compose([
    TV.RandomResizedCrop(72, scale=(0.25, 1.0)),
    TV.RandomHorizontalFlip(),
    TV.RandomVerticalFlip(0.3),
    TV.Pad(3, padding_mode="reflect"),
    TV.RandomApply([TV.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
    TV.RandomGrayscale(0.2),
    TV.RandomChoice([TV.Grayscale(3), TV.GaussianBlur(5, sigma=(0.1, 2.0)),
                     TV.ColorJitter(brightness=0.5)]),
    TV.ToTensor(),
    TV.Normalize(MEAN, STD),
    TV.RandomErasing(p=0.6, value=(0.1, 0.2, 0.3)),
])


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    try:
        real_photo_folder.source_paths()
    except SystemExit as e:
        pytest.fail("real photographs are missing: %s (scripts/install-deps.sh installs them)" % e)
    folder = str(tmp_path_factory.mktemp("photos"))
    return real_photo_folder.write_real_photo_folder(folder, 24, 3, 5, 200, 320)


def jitter(img, d):
    for k in d["order"]:
        if d[NAMES[k]] is not None:
            img = ADJUST[k](img, d[NAMES[k]])
    return img


def torchvision_with(img, d):
    """RECIPE's ops on the PIL image `img` with sluice's draws `d` (one dict per op)."""
    _, crop, hflip, vflip, _, apply_d, grey_d, choice_d, _, erase_d = d
    img = F.resized_crop(img, crop["top"], crop["left"], crop["height"], crop["width"], [72, 72],
                         TV.InterpolationMode.BILINEAR)
    if hflip["flip"]:
        img = F.hflip(img)
    if vflip["flip"]:
        img = F.vflip(img)
    img = F.pad(img, 3, padding_mode="reflect")
    if apply_d["applied"]:
        img = jitter(img, apply_d["ops"][0])
    if grey_d["grey"]:
        img = F.to_grayscale(img, num_output_channels=3)
    k, op_d = choice_d["choice"], choice_d["op"]
    if k == 0:
        img = F.to_grayscale(img, num_output_channels=3)
    elif k == 1:
        sigma = float(np.float32(op_d["sigma"]))
        img = F.gaussian_blur(img, [5, 5], [sigma, sigma])
    else:
        img = jitter(img, op_d)
    x = F.normalize(F.to_tensor(img), MEAN, STD)
    if erase_d["erase"]:
        x = F.erase(x, erase_d["top"], erase_d["left"], erase_d["height"], erase_d["width"],
                    torch.tensor([0.1, 0.2, 0.3])[:, None, None])
    return x.numpy(), k == 1


def test_every_augmentation_in_one_chain_is_torchvisions_over_real_photographs(photos):
    text = T.chain_text([T.DecodeImage()] + RECIPE.transforms)
    for name in ("antialias=True", "RandomApply([ColorJitter(", "pil=True", "RandomChoice(",
                 "GaussianBlur(", "Pad(", "RandomVerticalFlip(", "RandomErasing("):
        assert name in text
    blurred = exact = 0
    chosen, applied, erased = set(), 0, 0
    for index, path in enumerate(photos):
        with open(path, "rb") as f:
            data = f.read()
        img = Image.open(path).convert("RGB")
        d = [json.loads(s) for s in _sluice._transform_draws(
            text, [3, img.height, img.width], "uint8", seed=9, epoch=2, index=index)]
        ours = _sluice._decode_transforms(text, data, seed=9, epoch=2, index=index)
        theirs, blur = torchvision_with(img, d)
        assert ours.shape == theirs.shape == (3, 78, 78)
        chosen.add(d[7]["choice"])
        applied += d[5]["applied"]
        erased += d[9]["erase"]
        if blur:  # a float convolution: one u8 level apart, on few values
            blurred += 1
            diff = np.abs(ours - theirs)
            assert diff.max() <= 1.0 / 255 / min(STD) + 1e-6, (path, d)
            assert (diff > 1e-6).mean() <= 2e-3, (path, d)
        else:
            exact += 1
            assert np.array_equal(ours, theirs), (path, d)
    # The draws exercised every branch: each choice, RandomApply both ways, erasing both ways.
    assert chosen == {0, 1, 2} and 0 < applied < len(photos) and 0 < erased < len(photos)
    assert blurred > 0 and exact > 0, (blurred, exact)
