"""Every transform against torchvision 0.14 applied to the same tensor (docs/transforms.md).

Deterministic ops must be bitwise equal to torchvision's output. RandomCrop draws its offsets from
sluice's own generator, so each output must equal torchvision's RandomCrop (its own padding code,
forward() run with each fixed offset) at one offset, and over many samples every offset appears."""
import numpy as np
import pytest
import torch
import torchvision.transforms as T

from sluice import _sluice


def apply(chain, x, index=0, input_dtype=""):
    return _sluice._apply_transforms(chain, np.ascontiguousarray(x), seed=3, epoch=1, index=index,
                                     input_dtype=input_dtype)


def bits(a):
    """An array's raw bits, so +0/-0 and NaN payloads count and the comparison is bitwise."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def image_u8(c, h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(c, h, w), dtype=np.uint8)


def every_u8_value(c):
    """c channels of 16x16: each holds all 256 values, in a different order per channel."""
    return np.stack([np.roll(np.arange(256, dtype=np.uint8), 37 * k).reshape(16, 16)
                     for k in range(c)])


@pytest.mark.parametrize("shape,size", [((3, 10, 11), (4, 4)), ((1, 9, 7), (4, 4)),
                                        ((2, 8, 8), (8, 8)), ((3, 5, 6), (9, 7)),
                                        ((3, 6, 4), (3, 9))])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_center_crop_is_bitwise_torchvisions(shape, size, dtype):
    x = image_u8(*shape).astype(dtype)
    ours = apply("CenterCrop((%d, %d))" % size, x)
    theirs = T.CenterCrop(size)(torch.from_numpy(x)).numpy()
    assert ours.shape == theirs.shape
    assert np.array_equal(bits(ours), bits(theirs))


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32])
def test_flip_at_p1_is_bitwise_torchvisions_and_p0_is_the_input(dtype):
    x = image_u8(3, 5, 7).astype(dtype)
    theirs = T.RandomHorizontalFlip(p=1.0)(torch.from_numpy(x)).numpy()
    for index in range(5):
        assert np.array_equal(bits(apply("RandomHorizontalFlip(p=1)", x, index)), bits(theirs))
        assert np.array_equal(bits(apply("RandomHorizontalFlip(p=0)", x, index)), bits(x))


MEANS = [(0.4914, 0.4822, 0.4465), (0.0, 0.5, -1.25)]
STDS = [(0.247, 0.243, 0.261), (1.0, 0.3, 7.0)]


@pytest.mark.parametrize("mean,std", list(zip(MEANS, STDS)))
def test_normalize_on_u8_is_bitwise_to_tensor_then_normalize(mean, std):
    # ToTensor's x / 255 (float32 division), then Normalize's sub_ and div_ in float32: the same
    # IEEE operations the converter's kernel is proven against, so no ulp is allowed.
    x = every_u8_value(3)
    chain = "Normalize(mean=[%r, %r, %r], std=[%r, %r, %r])" % (mean + std)
    theirs = T.Normalize(mean, std)(T.ToTensor()(x.transpose(1, 2, 0).copy())).numpy()
    ours = apply(chain, x)
    assert ours.dtype == np.float32
    assert np.array_equal(bits(ours), bits(theirs))


def test_normalize_on_f32_is_bitwise_torchvisions_per_channel():
    x = np.random.default_rng(1).normal(size=(3, 9, 13)).astype(np.float32) * 50
    mean, std = MEANS[0], STDS[0]
    chain = "Normalize(mean=[%r, %r, %r], std=[%r, %r, %r])" % (mean + std)
    theirs = T.Normalize(mean, std)(torch.from_numpy(x.copy())).numpy()
    assert np.array_equal(bits(apply(chain, x)), bits(theirs))


def test_normalize_with_one_mean_broadcasts_like_torchvision():
    x = every_u8_value(2)
    theirs = T.Normalize([0.5], [0.25])(T.ToTensor()(x.transpose(1, 2, 0).copy())).numpy()
    assert np.array_equal(bits(apply("Normalize(0.5, 0.25)", x)), bits(theirs))


TORCH = {"u8": torch.uint8, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def cast_inputs():
    """Finite values of each input type that every cast is defined on (torch's float -> uint8 is
    undefined outside (-1, 256), so those are left to the C++ tests; the upper bound is 255, as
    255.99 rounds to 256 in f16 and bf16)."""
    rng = np.random.default_rng(2)
    f = np.concatenate([rng.uniform(-0.99, 255.0, 400), rng.normal(size=200) * 1e-3,
                        np.array([0.0, -0.0, 1.0, 255.0, 0.5, 2.5, 1 + 2 ** -11, 1 + 2 ** -8])])
    f = f.astype(np.float32).reshape(1, 4, -1)
    return {"u8": torch.from_numpy(every_u8_value(1)), "f32": torch.from_numpy(f),
            "f16": torch.from_numpy(f).to(torch.float16),
            "bf16": torch.from_numpy(f).to(torch.bfloat16)}


def to_numpy(t):
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


@pytest.mark.parametrize("source", ["u8", "f16", "bf16", "f32"])
@pytest.mark.parametrize("target", ["u8", "f16", "bf16", "f32"])
def test_cast_is_bitwise_tensor_to(source, target):
    t = cast_inputs()[source]
    ours = apply("ToDtype(%s)" % target, to_numpy(t), input_dtype="bf16" if source == "bf16" else "")
    theirs = to_numpy(t.to(TORCH[target]))
    assert ours.dtype == theirs.dtype
    assert np.array_equal(bits(ours), bits(theirs))


class AtOffset(T.RandomCrop):
    """torchvision's RandomCrop with a chosen offset: forward() pads exactly as torchvision does,
    and the padded size it crops from is recorded."""

    def __init__(self, top, left, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.offset = (top, left)

    def get_params(self, img, output_size):
        self.padded = img.shape[-2:]
        return self.offset[0], self.offset[1], output_size[0], output_size[1]


CROPS = [
    ("constant", dict(size=(5, 6), padding=(3, 1, 2, 4), fill=9)),
    ("edge", dict(size=(5, 6), padding=(3, 1, 2, 4))),
    ("reflect", dict(size=(5, 6), padding=(3, 1, 2, 4))),
    ("symmetric", dict(size=(5, 6), padding=(3, 1, 2, 4))),
    ("constant", dict(size=(8, 12), padding=1, pad_if_needed=True, fill=3)),
    ("edge", dict(size=(8, 12), padding=1, pad_if_needed=True)),
    ("reflect", dict(size=(8, 12), padding=1, pad_if_needed=True)),
    ("symmetric", dict(size=(8, 12), padding=(1, 2), pad_if_needed=True)),
]


def crop_text(mode, kw):
    pad = kw["padding"]
    return "RandomCrop(%r, padding=%r, pad_if_needed=%r, fill=%r, padding_mode=%s)" % (
        tuple(kw["size"]), pad, kw.get("pad_if_needed", False), kw.get("fill", 0), mode)


@pytest.mark.parametrize("mode,kw", CROPS)
def test_random_crop_outputs_are_torchvisions_crops_and_cover_every_offset(mode, kw):
    x = image_u8(3, 6, 7, seed=5)
    t = torch.from_numpy(x)
    probe = AtOffset(0, 0, padding_mode=mode, **kw)
    probe(t)
    ph, pw = probe.padded
    h, w = kw["size"]
    crops = {}
    for top in range(ph - h + 1):
        for left in range(pw - w + 1):
            crops[(top, left)] = AtOffset(top, left, padding_mode=mode, **kw)(t).numpy()
    seen = set()
    for index in range(40 * len(crops)):
        out = apply(crop_text(mode, kw), x, index)
        matches = [o for o, c in crops.items() if np.array_equal(out, c)]
        assert matches, "sample %d of %s is none of torchvision's crops" % (index, crop_text(mode, kw))
        seen.update(matches)
    assert seen == set(crops)


def test_random_crop_f32_reflect_matches_torchvision():
    x = np.random.default_rng(4).normal(size=(2, 7, 5)).astype(np.float32)
    t = torch.from_numpy(x)
    kw = dict(size=(7, 5), padding=2, padding_mode="reflect")
    crops = [AtOffset(i, j, **kw)(t).numpy() for i in range(5) for j in range(5)]
    for index in range(50):
        out = apply("RandomCrop((7, 5), padding=2, padding_mode=reflect)", x, index)
        assert any(np.array_equal(bits(out), bits(c)) for c in crops)


def test_impossible_shapes_and_bad_strings_raise_value_error_naming_them():
    x = image_u8(3, 32, 32)
    with pytest.raises(ValueError, match=r"crop 40x40 is larger than the padded image 36x36"):
        apply("RandomCrop(40, padding=2)", x)
    with pytest.raises(ValueError, match=r"have 2 values; expected one per channel \(3\)"):
        apply("Normalize(mean=[0.5, 0.5], std=[1, 1])", x)
    with pytest.raises(ValueError, match=r"unknown transform 'RandomCrap'; known: CenterCrop"):
        apply("RandomCrap(32)", x)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32])
def test_vertical_flip_at_p1_is_bitwise_torchvisions_and_p0_is_the_input(dtype):
    x = image_u8(3, 6, 5).astype(dtype)
    theirs = T.RandomVerticalFlip(p=1.0)(torch.from_numpy(x)).numpy()
    for index in range(5):
        assert np.array_equal(bits(apply("RandomVerticalFlip(p=1)", x, index)), bits(theirs))
        assert np.array_equal(bits(apply("RandomVerticalFlip(p=0)", x, index)), bits(x))


PADDINGS = [1, (2, 3), (3, 0, 1, 2)]


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_pad_is_bitwise_torchvisions_on_tensors(padding, mode, dtype):
    x = image_u8(3, 7, 9).astype(dtype)
    theirs = T.Pad(padding, fill=7, padding_mode=mode)(torch.from_numpy(x)).numpy()
    ours = apply("Pad(%r, fill=7, padding_mode=%r)" % (padding, mode), x)
    assert ours.shape == theirs.shape
    assert np.array_equal(bits(ours), bits(theirs))


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("channels", [1, 3])
def test_pad_and_vertical_flip_are_torchvisions_on_pil_images(padding, mode, channels):
    """On PIL images (an ImageFolder pipeline) torchvision pads with ImageOps / NumPy: the same
    pixels as its tensor path, so sluice's one implementation is both."""
    from PIL import Image
    x = image_u8(channels, 8, 11, seed=4)
    pil = Image.fromarray(x[0] if channels == 1 else x.transpose(1, 2, 0))
    pil_out = np.asarray(T.RandomVerticalFlip(p=1.0)(T.Pad(padding, 5, mode)(pil)))
    theirs = pil_out[None] if channels == 1 else pil_out.transpose(2, 0, 1)
    ours = apply("Pad(%r, fill=5, padding_mode=%r), RandomVerticalFlip(p=1)" % (padding, mode), x)
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_grayscale_is_bitwise_torchvisions_on_tensors(channels, dtype):
    x = (every_u8_value(3) if dtype == np.uint8 else
         np.random.default_rng(2).random((3, 16, 16), dtype=np.float32))
    x = np.ascontiguousarray(x[:channels])
    for n in (1, 3):
        theirs = T.Grayscale(n)(torch.from_numpy(x)).numpy()
        ours = apply("Grayscale(%d)" % n, x)
        assert ours.shape == theirs.shape
        assert np.array_equal(bits(ours), bits(theirs))
        ours = apply("RandomGrayscale(p=1)", x)
        assert np.array_equal(bits(ours), bits(T.RandomGrayscale(p=1.0)(torch.from_numpy(x))))


@pytest.mark.parametrize("channels", [1, 3])
def test_grayscale_with_pil_true_is_pils_convert_l(channels):
    """PIL's convert("L") over 2^18 random pixels and every value on each channel."""
    from PIL import Image
    x = np.concatenate([every_u8_value(3), image_u8(3, 16, 16, seed=9)], axis=2)[:channels]
    x = np.ascontiguousarray(x)
    pil = Image.fromarray(x[0] if channels == 1 else x.transpose(1, 2, 0))
    for n in (1, 3):
        out = np.asarray(T.Grayscale(n)(pil))
        theirs = out[None] if n == 1 else out.transpose(2, 0, 1)
        assert np.array_equal(apply("Grayscale(%d, pil=True)" % n, x), theirs)
    out = np.asarray(T.RandomGrayscale(p=1.0)(pil))
    theirs = out[None] if channels == 1 else out.transpose(2, 0, 1)
    assert np.array_equal(apply("RandomGrayscale(p=1, pil=True)", x), theirs)
    big = image_u8(3, 512, 512, seed=10)
    theirs = np.asarray(Image.fromarray(big.transpose(1, 2, 0)).convert("L"))[None]
    assert np.array_equal(apply("Grayscale(pil=True)", big), theirs)


def test_torchvisions_grayscale_takes_the_semantics_of_its_place():
    from sluice.transforms import chain_text
    assert "pil=True" in chain_text([T.Grayscale(3), T.RandomGrayscale(0.2)])
    assert chain_text([T.Grayscale(3), T.ToTensor()]).count("pil=True") == 1
    assert "pil=True" not in chain_text([T.ToTensor(), T.Grayscale(3), T.RandomGrayscale()])
