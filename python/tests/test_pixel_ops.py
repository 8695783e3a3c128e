"""RandomInvert, RandomPosterize, RandomSolarize, RandomAutocontrast, RandomEqualize and
RandomAdjustSharpness against torchvision 0.14 and Pillow 9.4 (docs/transforms.md).

With p=1 each op is deterministic: sluice's output must be torchvision's functional op on the
tensor (u8, and f32 in [0, 1] where torchvision takes floats) and, with pil=True (or, for the
ops without a pil argument, as they are), the PIL function on the PIL image. Bit for bit
everywhere (measured: 0 differing values), except f32 sharpness, tested within F32_SHARPNESS
(measured 0 apart: sluice repeats torch's CPU convolution, one fused multiply-add per tap)."""
import json

import numpy as np
import pytest
import torch
import torchvision.transforms as TV
import torchvision.transforms.functional as F
from PIL import Image, ImageEnhance, ImageOps

from sluice import _sluice
from sluice import transforms as T

F32_SHARPNESS = 2.4e-7  # 2 float32 ulps at 1; measured 0


def apply(chain, x, index=0):
    return _sluice._apply_transforms(chain, np.ascontiguousarray(x), seed=5, epoch=0, index=index)


def to_pil(x):
    return Image.fromarray(x[0] if x.shape[0] == 1 else x.transpose(1, 2, 0))


def from_pil(img):
    a = np.asarray(img)
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def tensor(x):
    return torch.from_numpy(x.copy())


def _images():
    """Every u8 value (16x16 planes of 0..255, rolled per channel), random images of a few
    shapes over the full range and over a narrower one (so autocontrast stretches), a few
    levels only (so equalize's table steps), and images too small to blur."""
    rng = np.random.default_rng(0)
    every = np.arange(256, dtype=np.uint8).reshape(16, 16)
    out = [np.stack([np.roll(every, 37 * c) for c in range(3)]), every[None].copy()]
    for shape in [(3, 31, 29), (1, 20, 22), (3, 64, 48), (3, 3, 3), (1, 2, 5), (3, 7, 2)]:
        out.append(rng.integers(0, 256, size=shape, dtype=np.uint8))
        out.append(rng.integers(40, 200, size=shape, dtype=np.uint8))
    for shape in [(3, 24, 24), (1, 17, 31), (1, 1, 301)]:
        levels = rng.integers(0, 256, size=4)
        weights = np.array([0.7, 0.2, 0.08, 0.02])
        out.append(rng.choice(levels, size=shape, p=weights).astype(np.uint8))
    return out


IMAGES = _images()


def as_float(x):
    return (x / 255.0).astype(np.float32)


def test_invert_is_torchvisions_and_pils():
    for x in IMAGES:
        ours = apply("RandomInvert(p=1)", x)
        assert np.array_equal(ours, F.invert(tensor(x)).numpy())
        assert np.array_equal(ours, from_pil(ImageOps.invert(to_pil(x))))
        xf = as_float(x)
        assert np.array_equal(apply("RandomInvert(p=1)", xf), F.invert(tensor(xf)).numpy())


def test_posterize_is_torchvisions_and_pils():
    for x in IMAGES:
        for bits in range(9):
            ours = apply("RandomPosterize(%d, p=1)" % bits, x)
            assert np.array_equal(ours, F.posterize(tensor(x), bits).numpy()), bits
            assert np.array_equal(ours, from_pil(ImageOps.posterize(to_pil(x), bits))), bits


def test_solarize_is_torchvisions_and_pils():
    for x in IMAGES:
        for threshold in (0, 1, 77.5, 128, 200, 255):
            ours = apply("RandomSolarize(%r, p=1)" % threshold, x)
            assert np.array_equal(ours, F.solarize(tensor(x), threshold).numpy()), threshold
            pil = from_pil(ImageOps.solarize(to_pil(x), threshold))
            assert np.array_equal(ours, pil), threshold
        xf = as_float(x)
        for threshold in (0, 0.3, 0.5, 0.5 + 1e-9, 1.0):
            ours = apply("RandomSolarize(%r, p=1)" % threshold, xf)
            assert np.array_equal(ours, F.solarize(tensor(xf), threshold).numpy()), threshold


def test_solarize_compares_in_float32_as_torch():
    # 128.000001 is 128 in float32: torch inverts 128, PIL (a double comparison) keeps it.
    x = IMAGES[0]
    ours = apply("RandomSolarize(128.000001, p=1)", x)
    assert np.array_equal(ours, F.solarize(tensor(x), 128.000001).numpy())
    pil = from_pil(ImageOps.solarize(to_pil(x), 128.000001))
    assert np.array_equal(ours != pil, x == 128)


def test_autocontrast_is_torchvisions_and_with_pil_pils():
    differs = 0
    for x in IMAGES:
        ours = apply("RandomAutocontrast(p=1)", x)
        assert np.array_equal(ours, F.autocontrast(tensor(x)).numpy())
        xf = as_float(x)
        assert np.array_equal(apply("RandomAutocontrast(p=1)", xf),
                              F.autocontrast(tensor(xf)).numpy())
        pil = from_pil(ImageOps.autocontrast(to_pil(x)))
        assert np.array_equal(apply("RandomAutocontrast(p=1, pil=True)", x), pil)
        differs += int((ours != pil).sum())
    assert differs > 0  # the two libraries' arithmetic differ: hence pil=


def test_equalize_is_torchvisions_and_pils():
    for x in IMAGES:
        ours = apply("RandomEqualize(p=1)", x)
        assert np.array_equal(ours, F.equalize(tensor(x)).numpy())
        assert np.array_equal(ours, from_pil(ImageOps.equalize(to_pil(x))))


@pytest.mark.parametrize("factor", [0, 0.1, 0.3, 0.5, 1, 1.7, 2, 5.5])
def test_sharpness_is_torchvisions_and_with_pil_pils(factor):
    worst = 0.0
    for x in IMAGES:
        ours = apply("RandomAdjustSharpness(%r, p=1)" % factor, x)
        assert np.array_equal(ours, F.adjust_sharpness(tensor(x), factor).numpy()), x.shape
        pil = from_pil(ImageEnhance.Sharpness(to_pil(x)).enhance(factor))
        assert np.array_equal(apply("RandomAdjustSharpness(%r, p=1, pil=True)" % factor, x),
                              pil), x.shape
        xf = as_float(x)
        theirs = F.adjust_sharpness(tensor(xf), factor).numpy()
        worst = max(worst, float(np.abs(apply("RandomAdjustSharpness(%r, p=1)" % factor, xf)
                                        - theirs).max()))
    assert worst <= F32_SHARPNESS


def test_u8_only_ops_and_thresholds_are_refused_as_torchvision_refuses_them():
    xf = as_float(IMAGES[0])
    for chain in ("RandomPosterize(3, p=1)", "RandomEqualize(p=1)", "RandomSolarize(128, p=1)",
                  "RandomAutocontrast(p=1, pil=True)"):
        with pytest.raises(Exception) as error:
            apply(chain, xf)
        assert chain.split("(")[0] in str(error.value)
    with pytest.raises(TypeError):
        F.posterize(tensor(xf), 3)
    with pytest.raises(TypeError):
        F.solarize(tensor(xf), 128)


def test_p_draws_once_per_sample():
    x = IMAGES[0]
    chain = "RandomInvert(p=0.5)"
    inverted = 0
    for index in range(40):
        out = apply(chain, x, index)
        d = json.loads(_sluice._transform_draws(chain, list(x.shape), "uint8", seed=5, epoch=0,
                                                index=index)[0])
        assert np.array_equal(out, 255 - x if d["applied"] else x), index
        inverted += d["applied"]
    assert 8 < inverted < 32


def test_chain_text_gives_pil_where_the_arithmetic_differs():
    assert T.chain_text([TV.RandomEqualize(), TV.ToTensor()]) == "RandomEqualize(p=0.5)"
    assert T.chain_text([TV.RandomAutocontrast(p=0.3), TV.ToTensor()]) == (
        "RandomAutocontrast(p=0.3, pil=True)")
    assert T.chain_text([TV.RandomAdjustSharpness(2), TV.RandomPosterize(3),
                         TV.RandomSolarize(128), TV.RandomInvert(), TV.ToTensor()]) == (
        "RandomAdjustSharpness(sharpness_factor=2, p=0.5, pil=True), "
        "RandomPosterize(bits=3, p=0.5), RandomSolarize(threshold=128, p=0.5), "
        "RandomInvert(p=0.5)")
    # After ToTensor: the tensor path, on ToTensor's floats.
    assert T.chain_text([TV.ToTensor(), TV.RandomAdjustSharpness(1.5, p=0.2)]) == (
        "Normalize(mean=[0.0], std=[1.0]), "
        "RandomAdjustSharpness(sharpness_factor=1.5, p=0.2)")
