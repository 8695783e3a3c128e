"""GaussianBlur against torchvision 0.14's F.gaussian_blur with the sigma sluice drew
(docs/transforms.md).

sluice blurs along the rows then along the columns in float32; torch convolves with the 2-D
kernel (the outer product of the same float32 weights), so the two differ by float rounding only.
Measured (seed 3, epoch 1, 24 samples a case; f32 values uniform in [0, 1), u8 uniform in
[0, 255]):
  kernels up to 31 (CASES below, and 3x224x224 with kernel 23, sigma in [0.1, 2]): f32 max |diff|
  1.25e-6 (9.5e-7 over CASES); u8 at most 1 apart, 2.6e-5 of the values (2.1e-5 at 224x224);
  (101, 63) on 1x120x90, sigma in [5, 50]: f32 4.5e-6; (255, 255), sigma up to 100: f32 4.1e-5,
  u8 2.6e-4 of the values. Most of that is torch's own rounding (its 2-D sums grow with the
  kernel): sluice stays within 1.1e-6 of the float64 convolution with torchvision's weights in
  all of these (5.6e-7 for (101, 63), asserted here)."""
import json

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
import torchvision.transforms.functional_tensor as FT
from PIL import Image

from sluice import _sluice

F32_BOUND = 1.5e-6  # measured 1.25e-6 (kernels up to 31)
F32_BOUND_LARGE = 6e-6  # measured 4.5e-6 ((101, 63), sigma up to 50)
U8_FRACTION_BOUND = 5e-5  # measured 2.6e-5 of the values 1 apart (kernels up to 31)
EXACT_BOUND = 8e-7  # measured 5.6e-7: sluice against the float64 convolution, (101, 63)

SEED, EPOCH = 3, 1


def apply(chain, x, index):
    return _sluice._apply_transforms(chain, np.ascontiguousarray(x), seed=SEED, epoch=EPOCH,
                                     index=index)


def drawn_sigma(chain, x, index):
    dtype = "uint8" if x.dtype == np.uint8 else "float32"
    draws = _sluice._transform_draws(chain, list(x.shape), dtype, seed=SEED, epoch=EPOCH,
                                     index=index)
    # Written as the shortest text of a float32: the float32 value, as torch's .item() gives it.
    return float(np.float32(json.loads(draws[0])["sigma"]))


def chain_of(kernel, sigma):
    return "GaussianBlur((%d, %d), sigma=(%r, %r))" % (kernel + sigma)


def torchvision_blur(x, kernel, s):
    return F.gaussian_blur(torch.from_numpy(np.ascontiguousarray(x)), list(kernel), [s, s]).numpy()


# (C, H, W), (kx, ky), (sigma min, max): square and non-square kernels, an image just large
# enough to reflect (H = ky // 2 + 1), a 1-wide kernel and a fixed sigma.
CASES = [((3, 32, 32), (5, 5), (0.1, 2.0)),
         ((3, 17, 23), (5, 3), (0.5, 3.0)),
         ((1, 64, 48), (9, 9), (0.1, 5.0)),
         ((2, 7, 9), (3, 7), (1.0, 1.0)),
         ((4, 40, 31), (1, 11), (0.3, 8.0)),
         ((3, 6, 16), (31, 11), (2.0, 10.0)),
         ((3, 96, 96), (31, 15), (2.0, 10.0))]


@pytest.mark.parametrize("shape,kernel,sigma", CASES)
def test_f32_is_torchvisions_within_the_measured_bound(shape, kernel, sigma):
    chain = chain_of(kernel, sigma)
    for index in range(6):
        x = np.random.default_rng(index).random(size=shape, dtype=np.float32)
        s = drawn_sigma(chain, x, index)
        assert sigma[0] <= s <= sigma[1]
        ours = apply(chain, x, index)
        assert ours.dtype == np.float32 and ours.shape == x.shape
        assert np.abs(ours - torchvision_blur(x, kernel, s)).max() <= F32_BOUND


@pytest.mark.parametrize("shape,kernel,sigma", CASES)
def test_u8_is_torchvisions_at_most_1_apart_and_rarely(shape, kernel, sigma):
    chain = chain_of(kernel, sigma)
    differ = total = 0
    for index in range(6):
        x = np.random.default_rng(index).integers(0, 256, size=shape, dtype=np.uint8)
        s = drawn_sigma(chain, x, index)
        ours = apply(chain, x, index)
        assert ours.dtype == np.uint8 and ours.shape == x.shape
        diff = np.abs(ours.astype(np.int32) - torchvision_blur(x, kernel, s).astype(np.int32))
        assert diff.max() <= 1
        differ += int((diff != 0).sum())
        total += diff.size
    assert differ / total <= U8_FRACTION_BOUND


def test_224x224_is_torchvisions_within_the_measured_bounds():
    # About a million values a dtype: 8 samples of 3x224x224, kernel 23, one sigma each.
    kernel = (23, 23)
    chain = chain_of(kernel, (0.1, 2.0))
    differ = total = 0
    for index in range(8):
        rng = np.random.default_rng(index)
        x = rng.integers(0, 256, size=(3, 224, 224), dtype=np.uint8)
        s = drawn_sigma(chain, x, index)
        diff = np.abs(apply(chain, x, index).astype(np.int32) -
                      torchvision_blur(x, kernel, s).astype(np.int32))
        assert diff.max() <= 1
        differ += int((diff != 0).sum())
        total += diff.size
        xf = rng.random(size=(3, 224, 224), dtype=np.float32)
        assert np.abs(apply(chain, xf, index) - torchvision_blur(xf, kernel, s)).max() <= F32_BOUND
    assert differ / total <= U8_FRACTION_BOUND


def test_large_kernels_are_near_the_exact_blur_and_torchvisions():
    shape, kernel, sigma = (1, 120, 90), (101, 63), (5.0, 50.0)
    kx, ky = kernel
    chain = chain_of(kernel, sigma)
    for index in range(3):
        x = np.random.default_rng(index).random(size=shape, dtype=np.float32)
        s = drawn_sigma(chain, x, index)
        ours = apply(chain, x, index)
        assert np.abs(ours - torchvision_blur(x, kernel, s)).max() <= F32_BOUND_LARGE
        # The exact result: torchvision's float32 weights, convolved in float64.
        w2 = torch.outer(FT._get_gaussian_kernel1d(ky, s).double(),
                         FT._get_gaussian_kernel1d(kx, s).double())
        padded = torch.nn.functional.pad(torch.from_numpy(x).double()[None],
                                         [kx // 2, kx // 2, ky // 2, ky // 2], mode="reflect")
        exact = torch.nn.functional.conv2d(padded, w2.expand(shape[0], 1, ky, kx),
                                           groups=shape[0])[0].numpy()
        assert np.abs(ours - exact).max() <= EXACT_BOUND


@pytest.mark.parametrize("mode,channels", [("RGB", 3), ("L", 1)])
def test_a_pil_image_gets_the_tensor_arithmetic(mode, channels):
    # F.gaussian_blur on a PIL image converts it to a tensor, blurs and converts back: the same
    # u8 arithmetic, so the same bound.
    kernel, sigma = (7, 5), (0.1, 2.0)
    chain = chain_of(kernel, sigma)
    differ = total = 0
    for index in range(6):
        x = np.random.default_rng(index).integers(0, 256, size=(channels, 29, 37), dtype=np.uint8)
        hwc = x.transpose(1, 2, 0)
        image = Image.fromarray(hwc if channels == 3 else hwc[:, :, 0], mode)
        s = drawn_sigma(chain, x, index)
        theirs = np.asarray(F.gaussian_blur(image, list(kernel), [s, s]))
        theirs = theirs.transpose(2, 0, 1) if channels == 3 else theirs[None]
        diff = np.abs(apply(chain, x, index).astype(np.int32) - theirs.astype(np.int32))
        assert diff.max() <= 1
        differ += int((diff != 0).sum())
        total += diff.size
    assert differ / total <= U8_FRACTION_BOUND


def test_the_same_sample_gets_the_same_sigma_and_output():
    chain = chain_of((5, 5), (0.1, 2.0))
    x = np.random.default_rng(0).integers(0, 256, size=(3, 20, 20), dtype=np.uint8)
    sigmas = [drawn_sigma(chain, x, index) for index in range(20)]
    assert len(set(sigmas)) == 20
    assert drawn_sigma(chain, x, 7) == sigmas[7]
    assert np.array_equal(apply(chain, x, 7), apply(chain, x, 7))
    fixed = "GaussianBlur(3, sigma=0.75)"
    assert all(drawn_sigma(fixed, x, index) == 0.75 for index in range(5))


def test_an_image_too_small_to_reflect_is_refused():
    x = np.zeros((1, 2, 8), dtype=np.uint8)
    with pytest.raises(Exception, match="too small for kernel_size"):
        apply("GaussianBlur((3, 5))", x, 0)
