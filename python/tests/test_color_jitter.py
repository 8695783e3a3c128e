"""ColorJitter, RandomApply and RandomChoice against torchvision 0.14 (docs/transforms.md).

sluice draws an order and factors per sample from its own stream (`_transform_draws` reports
them); torchvision's functional ops run with those parameters must give the same output: bit
for bit on uint8 tensors and PIL images, and on float32 tensors but for the contrast mean (torch
sums a float grey image in its own order: within 4e-6, 1.4e-6 measured)."""
import json

import numpy as np
import pytest
import torch
import torchvision.transforms as TV
import torchvision.transforms.functional as F
from PIL import Image

from sluice import _sluice
from sluice import transforms as T

NAMES = ("brightness", "contrast", "saturation", "hue")
ADJUST = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
F32_BOUND = 4e-6


def apply(chain, x, index=0):
    return _sluice._apply_transforms(chain, np.ascontiguousarray(x), seed=3, epoch=1, index=index)


def draws(chain, x, index=0):
    dtype = "float32" if x.dtype == np.float32 else "uint8"
    return [json.loads(d) for d in _sluice._transform_draws(chain, list(x.shape), dtype, seed=3,
                                                            epoch=1, index=index)]


def jitter(img, d):
    """torchvision's ColorJitter.forward with sluice's draws."""
    for k in d["order"]:
        if d[NAMES[k]] is not None:
            img = ADJUST[k](img, d[NAMES[k]])
    return img


def to_pil(x):
    return Image.fromarray(x[0] if x.shape[0] == 1 else x.transpose(1, 2, 0))


def from_pil(img):
    a = np.asarray(img)
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def photo_like(c, h, w, seed):
    """Smooth gradients plus noise: colours of every hue and saturation, and grey pixels."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)),
                     ((xx + yy) * 127 // max(h + w - 2, 1))])[:c]
    noisy = base + rng.integers(-40, 41, size=base.shape)
    x = np.clip(noisy, 0, 255).astype(np.uint8)
    x[:, : h // 4, : w // 4] = x[:1, : h // 4, : w // 4]  # a grey corner: equal channels
    return x


@pytest.mark.parametrize("shape", [(3, 31, 29), (3, 64, 48), (1, 20, 22)])
@pytest.mark.parametrize("args", ["0.4, 0.4, 0.4, 0.1", "(0, 2), 0.8, (0.1, 1.9), 0.5",
                                  "hue=(-0.5, -0.2)"])
def test_tensor_semantics_are_torchvisions_with_the_drawn_parameters(shape, args):
    chain = "ColorJitter(%s)" % args
    for index in range(12):
        x = photo_like(*shape, seed=index)
        d = draws(chain, x, index)[0]
        assert sorted(d["order"]) == [0, 1, 2, 3]
        ours = apply(chain, x, index)
        assert np.array_equal(ours, jitter(torch.from_numpy(x.copy()), d).numpy()), (index, d)
        xf = (x / 255.0).astype(np.float32)
        df = draws(chain, xf, index)[0]
        theirs = jitter(torch.from_numpy(xf.copy()), df).numpy()
        assert np.abs(apply(chain, xf, index) - theirs).max() <= F32_BOUND, (index, df)


@pytest.mark.parametrize("shape", [(3, 31, 29), (3, 64, 48), (1, 20, 22)])
@pytest.mark.parametrize("args", ["0.4, 0.4, 0.4, 0.1", "(0, 2), 0.8, (0.1, 1.9), 0.5",
                                  "hue=(-0.5, -0.2)"])
def test_pil_semantics_are_image_enhance_and_pils_hue_bit_for_bit(shape, args):
    chain = "ColorJitter(%s, pil=True)" % args
    for index in range(12):
        x = photo_like(*shape, seed=100 + index)
        d = draws(chain, x, index)[0]
        theirs = from_pil(jitter(to_pil(x), d))
        assert np.array_equal(apply(chain, x, index), theirs), (index, d)


@pytest.mark.parametrize("pil", [False, True])
@pytest.mark.parametrize("hue", [0.1, -0.3, 0.5])
def test_hue_is_bitwise_over_every_rgb_colour(pil, hue):
    # PIL: all 2^24 colours in one 4096x4096 image (the hue shift is a function of a pixel
    # alone). torch's path takes 9 s over them all: every 7th colour there (7 is prime to 256,
    # so every blue value occurs with every red one).
    v = np.arange(0, 1 << 24, 1 if pil else 7, dtype=np.uint32)
    h_w = (4096, 4096) if pil else (1560, 1536)
    v = v[:h_w[0] * h_w[1]]
    x = np.stack([(v >> 16) & 255, (v >> 8) & 255, v & 255]).astype(np.uint8).reshape(3, *h_w)
    h = float(np.float32(hue))
    chain = "ColorJitter(hue=(%r, %r)%s)" % (h, h, ", pil=True" if pil else "")
    ours = apply(chain, x)
    if pil:
        theirs = from_pil(F.adjust_hue(to_pil(x), h))
    else:
        theirs = F.adjust_hue(torch.from_numpy(x), h).numpy()
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("pil", [False, True])
@pytest.mark.parametrize("kind,factors", [(0, (0.0, 0.37, 1.0, 1.9, 2.6)),
                                          (1, (0.0, 0.41, 1.0, 1.7)),
                                          (2, (0.0, 0.55, 1.0, 3.1))])
def test_each_adjustment_alone_over_every_u8_value(pil, kind, factors):
    x = np.stack([np.roll(np.arange(256, dtype=np.uint8), 37 * k).reshape(16, 16)
                  for k in range(3)])
    for f in factors:
        f = float(np.float32(f))
        ranges = ["None"] * 4
        ranges[kind] = "(%r, %r)" % (f, f)
        chain = "ColorJitter(%s%s)" % (", ".join(ranges), ", pil=True" if pil else "")
        if pil:
            theirs = from_pil(ADJUST[kind](to_pil(x), f))
        else:
            theirs = ADJUST[kind](torch.from_numpy(x.copy()), f).numpy()
        assert np.array_equal(apply(chain, x), theirs), (kind, f)


def test_torchvisions_color_jitter_takes_the_semantics_of_its_place():
    before = T.chain_text([TV.ColorJitter(0.4, 0.3, 0.2, 0.1), TV.ToTensor()])
    assert before == ("ColorJitter(brightness=[0.6, 1.4], contrast=[0.7, 1.3], "
                      "saturation=[0.8, 1.2], hue=[-0.1, 0.1], pil=True)")
    # After ToTensor it blends ToTensor's floats: x/255 first, as torchvision.
    after = T.chain_text([TV.ToTensor(), TV.ColorJitter(0.4)])
    assert after == ("Normalize(mean=[0.0], std=[1.0]), ColorJitter(brightness=[0.6, 1.4], "
                     "contrast=None, saturation=None, hue=None)")
    x = photo_like(3, 12, 10, seed=5)
    tensor = TV.ToTensor()(to_pil(x))
    for index in range(8):
        d = draws(after, x, index)[1]
        assert np.abs(apply(after, x, index) - jitter(tensor, d).numpy()).max() <= F32_BOUND
    with pytest.raises(ValueError, match="pil=True"):
        apply("Normalize(0.5, 0.5), ColorJitter(0.4, pil=True)", x)


def test_random_apply_and_random_choice_are_torchvisions_with_the_drawn_ops():
    chain = ("RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1, pil=True), RandomGrayscale(0.3, "
             "pil=True)], p=0.6), RandomChoice([RandomHorizontalFlip(1), RandomVerticalFlip(1), "
             "ColorJitter(hue=0.5, pil=True)], p=[1, 1, 2])")
    applied, chosen = 0, set()
    for index in range(40):
        x = photo_like(3, 18, 21, seed=200 + index)
        apply_d, choice_d = draws(chain, x, index)
        img = to_pil(x)
        if apply_d["applied"]:
            applied += 1
            jitter_d, grey_d = apply_d["ops"]
            img = jitter(img, jitter_d)
            if grey_d["grey"]:
                img = F.to_grayscale(img, num_output_channels=3)
        chosen.add(choice_d["choice"])
        k, op_d = choice_d["choice"], choice_d["op"]
        if k == 0:
            img = F.hflip(img)
        elif k == 1:
            img = F.vflip(img)
        else:
            img = jitter(img, op_d)
        assert np.array_equal(apply(chain, x, index), from_pil(img)), (index, apply_d, choice_d)
    assert 12 <= applied <= 36 and chosen == {0, 1, 2}


def test_torchvisions_random_apply_and_choice_become_sluices_with_their_ops():
    text = T.chain_text([TV.RandomApply([TV.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                         TV.RandomChoice([TV.RandomHorizontalFlip(1), TV.Grayscale(3)]),
                         TV.ToTensor()])
    assert text == ("RandomApply([ColorJitter(brightness=[0.6, 1.4], contrast=[0.6, 1.4], "
                    "saturation=[0.6, 1.4], hue=[-0.1, 0.1], pil=True)], 0.8), "
                    "RandomChoice([RandomHorizontalFlip(p=1), Grayscale(num_output_channels=3, pil=True)], "
                    "None)")
    x = photo_like(3, 10, 10, seed=1)
    assert apply(text, x).shape == (3, 10, 10)
    assert str(T.RandomApply([T.ColorJitter(0.4)], p=0.3)) == "RandomApply([ColorJitter(0.4)], p=0.3)"
    with pytest.raises(TypeError, match="give sluice.transforms ops here"):
        T.RandomApply([TV.ColorJitter(0.4)])
    with pytest.raises(ValueError, match="a skipped RandomApply leaves the sample as it is"):
        apply("RandomApply([CenterCrop(4)])", x)


def test_sluices_ops_check_their_arguments_when_built_in_the_users_words():
    for build, name in ((lambda: T.ColorJitter(0.4, 0.4, 0.4, 0.7), "'hue'"),
                        (lambda: T.GaussianBlur(4), "'kernel_size'"),
                        (lambda: T.RandomErasing(scale=(0.5, 0.1)), "'scale'"),
                        (lambda: T.RandomApply([T.ColorJitter(0.4)], p=1.5), "p")):
        with pytest.raises(ValueError) as e:
            build()
        assert name in str(e.value) and "character" not in str(e.value), str(e.value)
    assert not {"re", "math", "inspect"} & set(dir(T))


def test_torchvisions_tensor_only_ops_before_to_tensor_are_refused_as_torchvision_fails():
    with pytest.raises(ValueError, match="RandomErasing stands before ToTensor"):
        T.chain_text([TV.RandomCrop(32, padding=4), TV.RandomErasing(), TV.ToTensor()])
    with pytest.raises(ValueError, match="Normalize stands before ToTensor"):
        T.chain_text([TV.Normalize((0.5,), (0.5,)), TV.ToTensor()])
    assert T.chain_text([TV.ToTensor(), TV.Normalize((0.5,), (0.5,)), TV.RandomErasing()]) == (
        "Normalize(mean=[0.5], std=[0.5]), RandomErasing(p=0.5, scale=[0.02, 0.33], "
        "ratio=[0.3, 3.3], value=0, inplace=False)")
