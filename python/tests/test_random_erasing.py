"""RandomErasing against torchvision 0.14 (docs/transforms.md).

sluice draws the window from its own generator and reports it (_transform_draws); each output
must be bitwise torchvision's F.erase of the same tensor at that window with the value as
torchvision's forward() makes it (torch.tensor(value)[:, None, None]), or the input itself when
nothing is erased. value='random' fills the window with sluice's own normal values: checked by
the region and its statistics."""
import json

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F

import sluice.transforms
from sluice import _sluice


def apply(chain, x, index=0):
    return _sluice._apply_transforms(chain, np.ascontiguousarray(x), seed=3, epoch=1, index=index)


def draws(chain, x, index=0, op=-1):
    dtype = "uint8" if x.dtype == np.uint8 else "float32"
    return json.loads(_sluice._transform_draws(chain, list(x.shape), dtype, seed=3, epoch=1,
                                               index=index)[op])


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 4: np.uint32}[a.dtype.itemsize])


def image(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return (rng.normal(size=shape) * 3).astype(np.float32)


def theirs(x, d, value):
    """torchvision's output for draws `d`: forward()'s value list, then F.erase."""
    if not d["erase"]:
        return x
    values = [value] if isinstance(value, (int, float)) else list(value)
    return F.erase(torch.from_numpy(x.copy()), d["top"], d["left"], d["height"], d["width"],
                   torch.tensor(values)[:, None, None]).numpy()


def value_text(value):
    return repr(list(value)) if isinstance(value, (list, tuple)) else repr(value)


CASES = [  # (shape, dtype, value)
    ((3, 10, 11), np.uint8, 0),
    ((1, 9, 7), np.uint8, 200),
    ((3, 32, 32), np.uint8, (10, 200.7, 255)),
    ((3, 17, 5), np.uint8, 7.9),  # truncated, as torch's assignment of a float to uint8
    ((2, 40, 6), np.uint8, [128]),
    ((3, 10, 11), np.float32, 0),
    ((3, 24, 24), np.float32, (0.485, -2.1, 3.3)),
    ((1, 13, 29), np.float32, -1.5),
    ((2, 8, 9), np.float32, 0.1),
]


@pytest.mark.parametrize("shape,dtype,value", CASES)
@pytest.mark.parametrize("args", ["p=0.5", "p=1, scale=(0.1, 0.6), ratio=(0.5, 2)",
                                  "p=1, scale=(0.0, 0.02)"])
def test_erase_is_bitwise_torchvisions_at_the_drawn_window(shape, dtype, value, args):
    x = image(shape, dtype)
    chain = "RandomErasing(%s, value=%s)" % (args, value_text(value))
    erased = 0
    for index in range(40):
        d = draws(chain, x, index)
        if d["erase"]:
            erased += 1
            assert d["height"] < shape[1] and d["width"] < shape[2]
            assert d["top"] + d["height"] <= shape[1] and d["left"] + d["width"] <= shape[2]
        ours = apply(chain, x, index)
        expected = theirs(x, d, value)
        assert ours.dtype == expected.dtype and ours.shape == expected.shape
        assert np.array_equal(bits(ours), bits(expected)), (index, d)
    assert erased > (5 if args.startswith("p=0.5") else 10)  # 40x6 often fits no window


def test_p0_never_erases():
    x = image((3, 12, 12), np.uint8)
    for index in range(20):
        assert draws("RandomErasing(p=0)", x, index) == {"erase": False}
        assert np.array_equal(apply("RandomErasing(p=0)", x, index), x)


def test_a_window_that_never_fits_returns_the_image_as_torchvision_does():
    # scale=(1, 1): h < H and w < W never both hold, so after 10 attempts torchvision returns
    # the image itself (get_params' fallback 0, 0, H, W, img).
    x = image((3, 9, 14), np.float32)
    op = T.RandomErasing(p=1, scale=(1, 1))
    assert torch.equal(op(torch.from_numpy(x.copy())), torch.from_numpy(x))
    for index in range(20):
        assert draws("RandomErasing(p=1, scale=(1, 1))", x, index) == {"erase": False}
        assert np.array_equal(bits(apply("RandomErasing(p=1, scale=(1, 1))", x, index)), bits(x))


def test_random_fills_the_window_with_standard_normal_values():
    x = np.full((3, 40, 40), 100.0, dtype=np.float32)
    chain = "RandomErasing(p=1, scale=(0.2, 0.3), value='random')"
    values = []
    for index in range(100):
        d = draws(chain, x, index)
        assert d["erase"]
        ours = apply(chain, x, index)
        inside = np.zeros(x.shape, dtype=bool)
        inside[:, d["top"]:d["top"] + d["height"], d["left"]:d["left"] + d["width"]] = True
        assert np.all(ours[~inside] == 100.0)
        assert np.all(np.abs(ours[inside]) < 10)
        values.append(ours[inside])
        assert np.array_equal(ours, apply(chain, x, index))  # the sample's own values
    values = np.concatenate(values)
    assert values.size > 50000
    assert abs(values.mean()) < 0.02 and abs(values.std() - 1) < 0.02
    # As torch's normal_: about 68% within one sd.
    assert abs(np.mean(np.abs(values) < 1) - 0.6827) < 0.01


def test_random_is_refused_on_u8():
    with pytest.raises(ValueError, match="value=random needs float samples"):
        apply("RandomErasing(value='random')", image((3, 8, 8), np.uint8))


@pytest.mark.parametrize("chain,match", [
    ("RandomErasing(p=2)", "'p'"), ("RandomErasing(scale=(0.1, 1.5))", "'scale'"),
    ("RandomErasing(ratio=(0, 1))", "'ratio'"), ("RandomErasing(value='noise')", "'value'"),
    ("RandomErasing(value=300)", "'value'"), ("RandomErasing(value=[1, 2])", "'value'")])
def test_bad_arguments_are_refused_naming_the_argument(chain, match):
    with pytest.raises(ValueError, match=match):
        apply(chain, image((3, 8, 8), np.uint8))


MEAN, STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)


@pytest.mark.parametrize("value", [0, (0.5, -1.0, 2.0), "random"])
def test_torchvisions_own_objects_give_a_chain_sluice_runs(value):
    ops = [T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(p=0.7, value=value)]
    chain = sluice.transforms.chain_text(ops)
    assert chain.startswith("Normalize(")
    assert ", RandomErasing(p=0.7, scale=[0.02, 0.33], ratio=[0.3, 3.3], value=" in chain
    x = image((3, 20, 20), np.uint8)
    normalized = T.Normalize(MEAN, STD)(T.ToTensor()(x.transpose(1, 2, 0).copy())).numpy()
    for index in range(20):
        ours = apply(chain, x, index)
        d = draws(chain, x, index)
        assert ours.dtype == np.float32 and ours.shape == x.shape
        if value == "random":
            if not d["erase"]:
                assert np.array_equal(bits(ours), bits(normalized))
            continue
        assert np.array_equal(bits(ours), bits(theirs(normalized, d, value))), (index, d)
