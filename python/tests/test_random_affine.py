"""RandomRotation and RandomAffine against torchvision 0.14's F.rotate / F.affine with the
parameters sluice drew (docs/transforms.md).

Tensor semantics (pil=False) follow F_t's float32 steps: the matrix rounded to float32, the grid
of _gen_affine_grid, grid_sample's unnormalize and bilinear sums with the fused multiply-adds of
torch 1.13's AVX2 CPU kernels, and torchvision's fill mask. PIL semantics (pil=True) follow
Pillow 9.4's Image.rotate / Image.transform(AFFINE). Measured (seed 3, epoch 1, 8 samples a case,
the CASES below on 3x32x32, 1x29x37 and 3x64x48, plus 3x224x224; u8 values uniform in [0, 255],
f32 uniform in [0, 1)): every case is bit for bit, nearest and bilinear, u8 and f32, tensor and
PIL: 0 pixels differ and the max |diff| is 0. The bounds asserted leave room for a torch whose
CPU kernels fuse differently (its AVX512 or default kernels on another machine), which may
differ by float rounding: a source coordinate on a half for nearest (at most 1 pixel in 1,000),
1 level of u8 or 1e-5 of f32 for bilinear."""
import json

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from PIL import Image

import sluice.transforms
from sluice import _sluice

NEAREST_FRACTION_BOUND = 1e-3  # measured 0 differing pixels (tensor and PIL)
BILINEAR_BOUND = {np.uint8: 1.0, np.float32: 1e-5}  # measured max |diff| 0 (tensor and PIL)

SEED, EPOCH = 3, 1


def apply(chain, x, index):
    return _sluice._apply_transforms(chain, np.ascontiguousarray(x), seed=SEED, epoch=EPOCH,
                                     index=index)


def draws(chain, x, index):
    dtype = "uint8" if x.dtype == np.uint8 else "float32"
    return json.loads(_sluice._transform_draws(chain, list(x.shape), dtype, seed=SEED,
                                               epoch=EPOCH, index=index)[0])


def f32(v):
    """A float32 draw as torch's .item() gives it."""
    return float(np.float32(v))


def torchvision_op(op, x, p, interpolation, fill, center, pil):
    mode = InterpolationMode.NEAREST if interpolation == "nearest" else InterpolationMode.BILINEAR
    if pil:
        img = Image.fromarray(x[0] if x.shape[0] == 1 else x.transpose(1, 2, 0))
        fill_arg = fill if not isinstance(fill, list) or x.shape[0] > 1 else fill[0]
    else:
        # RandomRotation/RandomAffine.forward on a tensor: fill as a list of floats per channel.
        img = torch.from_numpy(np.ascontiguousarray(x))
        fill_arg = ([float(v) for v in fill] if isinstance(fill, list)
                    else [float(fill)] * x.shape[0])
    if op == "RandomRotation":
        out = F.rotate(img, f32(p["angle"]), interpolation=mode, center=center, fill=fill_arg)
    else:
        out = F.affine(img, f32(p["angle"]), p["translate"], f32(p["scale"]),
                       [f32(s) for s in p["shear"]], interpolation=mode, fill=fill_arg,
                       center=center)
    if pil:
        a = np.asarray(out)
        return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)
    return out.numpy()


CASES = [("RandomRotation", "180", None),
         ("RandomRotation", "(-45, 45), center=(5, 7)", [5, 7]),
         ("RandomRotation", "(90, 90)", None),  # PIL's transposes on square images
         ("RandomRotation", "(-90, -90)", None),
         ("RandomAffine", "30, translate=(0.2, 0.1), scale=(0.7, 1.3), shear=(-10, 10, -5, 5)",
          None),
         ("RandomAffine", "(-180, 180), scale=(0.5, 2.0), shear=20, center=(3, 20)", [3, 20]),
         ("RandomAffine", "0, translate=(0.3, 0.3)", None),  # PIL's scale-only path
         ("RandomAffine", "0, scale=(0.5, 1.5)", None)]
SHAPES = [(3, 32, 32), (1, 29, 37), (3, 64, 48)]
SEMANTICS = [(False, np.uint8), (False, np.float32), (True, np.uint8)]


def compare(op, args, center, interpolation, pil, dtype, shape, samples):
    if dtype == np.uint8:
        fill = [10, 20, 30] if shape[0] == 3 else 7
    else:
        fill = [0.1, 0.5, 0.9] if shape[0] == 3 else 0.25
    chain = "%s(%s, interpolation=%s, fill=%s, pil=%s)" % (op, args, interpolation, fill, pil)
    differ = total = 0
    worst = 0.0
    for index in range(samples):
        rng = np.random.default_rng(index)
        x = (rng.integers(0, 256, size=shape, dtype=np.uint8) if dtype == np.uint8
             else rng.random(size=shape, dtype=np.float32))
        p = draws(chain, x, index)
        ours = apply(chain, x, index)
        assert ours.dtype == x.dtype and ours.shape == x.shape
        theirs = torchvision_op(op, x, p, interpolation, fill, center, pil)
        diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
        worst = max(worst, float(diff.max()))
        differ += int(np.any(diff > 0, axis=0).sum())
        total += shape[1] * shape[2]
    return differ / total, worst


@pytest.mark.parametrize("pil,dtype", SEMANTICS)
@pytest.mark.parametrize("op,args,center", CASES)
def test_nearest_is_torchvisions(op, args, center, pil, dtype):
    for shape in SHAPES:
        fraction, _ = compare(op, args, center, "nearest", pil, dtype, shape, 4)
        assert fraction <= NEAREST_FRACTION_BOUND, (shape, fraction)


@pytest.mark.parametrize("pil,dtype", SEMANTICS)
@pytest.mark.parametrize("op,args,center", CASES)
def test_bilinear_is_torchvisions(op, args, center, pil, dtype):
    for shape in SHAPES:
        _, worst = compare(op, args, center, "bilinear", pil, dtype, shape, 4)
        assert worst <= BILINEAR_BOUND[dtype], (shape, worst)


def test_a_large_image():
    for pil, dtype in SEMANTICS:
        for interpolation in ("nearest", "bilinear"):
            fraction, worst = compare("RandomAffine", "15, translate=(0.1, 0.1), scale=(0.9, 1.1)",
                                      None, interpolation, pil, dtype, (3, 224, 224), 1)
            assert fraction <= NEAREST_FRACTION_BOUND and worst <= BILINEAR_BOUND[dtype]


def test_draws_are_in_range_and_follow_get_params():
    chain = "RandomAffine((-20, 20), translate=(0.25, 0.5), scale=(0.5, 2), shear=(-5, 5, 1, 3))"
    x = np.zeros((3, 10, 8), np.uint8)
    seen = set()
    for index in range(50):
        p = draws(chain, x, index)
        assert -20 <= p["angle"] <= 20 and 0.5 <= p["scale"] <= 2
        assert abs(p["translate"][0]) <= 2 and abs(p["translate"][1]) <= 5
        assert -5 <= p["shear"][0] <= 5 and 1 <= p["shear"][1] <= 3
        assert all(isinstance(t, int) for t in p["translate"])
        assert p == draws(chain, x, index)  # reproducible
        seen.add(p["angle"])
    assert len(seen) == 50
    rotation = draws("RandomRotation(10)", x, 0)
    assert list(rotation) == ["angle"] and -10 <= rotation["angle"] <= 10


def test_torchvisions_objects_map_to_the_ops():
    text = sluice.transforms.chain_text([torchvision.transforms.RandomRotation(15),
                                         torchvision.transforms.ToTensor()])
    assert text.startswith("RandomRotation(degrees=[-15.0, 15.0], interpolation='nearest'")
    assert text.endswith("pil=True)")  # before ToTensor: PIL images
    after = sluice.transforms.chain_text([
        torchvision.transforms.ToTensor(),
        torchvision.transforms.RandomAffine(10, translate=(0.1, 0.2), scale=(0.9, 1.1), shear=5,
                                            interpolation=InterpolationMode.BILINEAR)])
    assert after.startswith("Normalize(mean=[0.0], std=[1.0]), RandomAffine(")
    assert "pil" not in after and "interpolation='bilinear'" in after
    # Both parse, and the parsed identity is canonical.
    for chain in (text, after):
        assert _sluice._parse_transforms(chain)
    with pytest.raises(ValueError, match="expand"):
        sluice.transforms.chain_text([torchvision.transforms.RandomRotation(15, expand=True)])
