"""sluice.Loader's dtype=torch.bfloat16 and memory_format=torch.channels_last: batches the
preprocess threads write in that dtype and memory order, holding exactly the values of the
float32 contiguous batch (bf16: rounded as tensor.to(torch.bfloat16) rounds); on arrays without
a chain, through a chain that ends in u8, through one that normalizes, and on a folder of JPEGs
and PNGs resized with PIL's semantics; bad values are refused naming the choices."""
import io

import numpy as np
import pytest
import torch
import torchvision.transforms as TV

import sluice
import sluice.transforms as T

PIL = pytest.importorskip("PIL.Image")
MEAN, STD = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)


@pytest.fixture(scope="module")
def colour(tmp_path_factory):
    """90 RGB arrays of 12x10 (height != width: a transposed layout would show)."""
    root = tmp_path_factory.mktemp("colour")
    rng = np.random.default_rng(5)
    sluice.write_dataset(str(root), "train", rng.integers(0, 256, (90, 12, 10, 3), np.uint8),
                         (np.arange(90) % 4).astype(np.uint8), records_per_frame=16)
    return str(root)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """31 encoded images of their own sizes: RGB JPEGs, grey JPEGs and RGB PNGs."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(9)
    data = []
    for i in range(31):
        a = rng.integers(0, 256, (40 + 7 * (i % 5), 50 + 3 * (i % 7), 3), np.uint8)
        image = PIL.fromarray(a) if i % 3 != 1 else PIL.fromarray(a[:, :, 0])
        buf = io.BytesIO()
        image.save(buf, format="PNG" if i % 3 == 2 else "JPEG", quality=90)
        data.append(buf.getvalue())
    sluice.write_dataset(str(root), "train", data, (np.arange(31) % 3).astype(np.uint8),
                         records_per_frame=8)
    return str(root)


def batches(path, **kwargs):
    return [(x.clone(memory_format=torch.preserve_format), y.clone())
            for x, y in sluice.Loader(path, batch_size=8, shuffle=True, seed=3, **kwargs)]


CHAINS = {
    "none": {"normalize": (MEAN, STD)},
    "u8 chain": {"transforms": [T.RandomCrop(8, padding=2), T.RandomHorizontalFlip()],
                 "normalize": (MEAN, STD)},
    "normalizing chain": {"transforms": [T.RandomCrop(8, padding=2), TV.ToTensor(),
                                         TV.Normalize(MEAN, STD)]},
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_bf16_and_channels_last_hold_the_float32_batches_values(colour, chain):
    want = batches(colour, **CHAINS[chain])
    for dtype in (torch.float32, torch.bfloat16):
        for memory_format in (torch.contiguous_format, torch.channels_last):
            got = batches(colour, dtype=dtype, memory_format=memory_format, **CHAINS[chain])
            assert len(got) == len(want)
            for (x, y), (wx, wy) in zip(got, want):
                assert x.dtype == dtype and x.shape == wx.shape
                assert x.is_contiguous(memory_format=memory_format)
                if memory_format == torch.channels_last:
                    assert not x.is_contiguous()  # the strides are channels_last's, not NCHW's
                # bitwise: bf16 is the float32 value rounded to nearest even, as torch rounds
                assert torch.equal(x.view(torch.int16) if dtype == torch.bfloat16 else x,
                                   wx.to(dtype).view(torch.int16) if dtype == torch.bfloat16
                                   else wx)
                assert torch.equal(y, wy)


def test_channels_last_on_photos_is_the_pil_pipelines_pixels(photos):
    """A vision pipeline as an ImageFolder user writes it, read channels_last in bf16: the
    same values as the NCHW float32 batches, which are bitwise PIL's (test_pil_resize.py)."""
    chain = [T.DecodeImage(), TV.RandomResizedCrop(24), TV.RandomHorizontalFlip(),
             TV.ToTensor(), TV.Normalize(MEAN, STD)]
    want = batches(photos, transforms=chain)
    got = batches(photos, transforms=chain, dtype=torch.bfloat16,
                  memory_format=torch.channels_last)
    for (x, _), (wx, _) in zip(got, want):
        assert x.shape == wx.shape == (x.shape[0], 3, 24, 24)
        assert x.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(x.view(torch.int16), wx.to(torch.bfloat16).view(torch.int16))
    u8 = batches(photos, transforms=[T.DecodeImage(), TV.Resize((20, 16)), TV.PILToTensor()],
                 dtype=torch.uint8, memory_format=torch.channels_last)
    u8_want = batches(photos, transforms=[T.DecodeImage(), TV.Resize((20, 16)), TV.PILToTensor()],
                      dtype=torch.uint8)
    for (x, _), (wx, _) in zip(u8, u8_want):
        assert x.is_contiguous(memory_format=torch.channels_last) and torch.equal(x, wx)


def test_channels_last_batches_feed_a_channels_last_conv_in_bf16(colour):
    """What the batches are for: a conv in channels_last and bf16 (CPU autocast) takes them."""
    conv = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    x, _ = next(iter(sluice.Loader(colour, 8, dtype=torch.bfloat16,
                                   memory_format=torch.channels_last, normalize=(MEAN, STD))))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(x)
    want = conv(x.float().contiguous())
    assert torch.allclose(y.float(), want, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("bad, message", [
    ({"memory_format": torch.preserve_format}, "memory_format: must be torch.contiguous_format "
                                               "or torch.channels_last"),
    ({"memory_format": "channels_last"}, "memory_format: must be"),
    ({"dtype": torch.float64}, "dtype: must be torch.float32, torch.float16, torch.bfloat16 or "
                               "torch.uint8"),
    ({"dtype": torch.float32, "transforms": [T.ToDtype(torch.bfloat16)]},
     "pass dtype=torch.bfloat16"),
])
def test_bad_choices_are_refused_naming_them(colour, bad, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        sluice.Loader(colour, 8, **bad)


def test_a_chain_that_ends_in_bf16_gives_bf16_batches(colour):
    x, _ = next(iter(sluice.Loader(colour, 8, dtype=torch.bfloat16,
                                   transforms=[T.Normalize(MEAN, STD), T.ToDtype(torch.bfloat16)])))
    want, _ = next(iter(sluice.Loader(colour, 8, transforms=[T.Normalize(MEAN, STD)])))
    assert x.dtype == torch.bfloat16
    assert torch.equal(x.view(torch.int16), want.to(torch.bfloat16).view(torch.int16))


def test_cuda_batches_hold_the_host_batches_values(colour):
    """Device batches: the same bytes uploaded, so the same values and strides on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False): the device copy of "
                    "bf16 / channels_last batches is checked on a GPU machine only")
    kwargs = dict(dtype=torch.bfloat16, memory_format=torch.channels_last, normalize=(MEAN, STD))
    host = batches(colour, **kwargs)
    device = [(x.cpu(), y.cpu()) for x, y in sluice.Loader(colour, batch_size=8, shuffle=True,
                                                          seed=3, device="cuda", **kwargs)]
    for (x, y), (hx, hy) in zip(device, host):
        assert x.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(x.view(torch.int16), hx.view(torch.int16)) and torch.equal(y, hy)


def test_simulated_device_batches_hold_the_host_batches_values(colour):
    """The device path (upload into device slots, DLPack with the layout's strides) on the
    simulated accelerator: the same bytes and strides as the host batches."""
    kwargs = dict(dtype=torch.bfloat16, memory_format=torch.channels_last, normalize=(MEAN, STD))
    host = batches(colour, **kwargs)
    sim = batches(colour, device="sim", **kwargs)
    assert len(sim) == len(host)
    for (x, y), (hx, hy) in zip(sim, host):
        assert x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
        assert torch.equal(x.view(torch.int16), hx.view(torch.int16)) and torch.equal(y, hy)
