"""DecodeImage, Resize and RandomResizedCrop against PIL 9.4 and torch 1.13 (docs/transforms.md).

PNG pixels must equal the arrays PIL wrote, JPEG pixels PIL's own decode of the same file (the same
libjpeg-turbo 2.1.5, the same decoder settings), bitwise. Resize must match
torch.nn.functional.interpolate(bilinear, align_corners=False) within the tolerance the docs state.
"""
import gzip
import io
import struct
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

import sluice
from sluice import _sluice

FASHION = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"


def decode(chain, data, index=0):
    # A bound of 600 x 600 (every test image fits) keeps each call's scratch small.
    return _sluice._decode_transforms(chain, data, seed=5, epoch=0, index=index, max_side=600)


def exact(mode, h, w):
    """A chain that decodes and keeps the whole image (CenterCrop to its own size)."""
    return "DecodeImage(mode=%s), CenterCrop((%d, %d))" % (mode, h, w)


def encoded(image, fmt, **options):
    buf = io.BytesIO()
    image.save(buf, format=fmt, **options)
    return buf.getvalue()


def pil_chw(data, mode):
    a = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


def photo(h, w, seed=0):
    """A smooth colour image with edges and noise, closer to a photo than uniform noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([128 + 100 * np.sin(x / 17 + c) * np.cos(y / 23 - c) for c in range(3)], -1)
    base[(x // 40 + y // 40) % 2 == 0] *= 0.6
    return np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)


def fashion_images(n):
    with gzip.open(FASHION, "rb") as f:
        f.read(16)
        return np.frombuffer(f.read(28 * 28 * n), dtype=np.uint8).reshape(n, 28, 28)


def test_fashion_mnist_pngs_written_by_pil_decode_to_the_original_arrays():
    for image in fashion_images(200):
        data = encoded(Image.fromarray(image, "L"), "PNG")
        assert np.array_equal(decode(exact("L", 28, 28), data), image[None])
        assert np.array_equal(decode(exact("RGB", 28, 28), data), np.stack([image] * 3))


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "P", "LA", "1"])
def test_png_of_every_colour_type_decodes_as_pil_converts_it(mode):
    rgb = Image.fromarray(photo(37, 53, seed=len(mode)))
    image = rgb.convert(mode) if mode != "P" else rgb.quantize(colors=200)
    data = encoded(image, "PNG")
    for out in ("RGB", "L"):
        ours = decode(exact(out, 37, 53), data)
        assert np.array_equal(ours, pil_chw(data, out)), (mode, out)


@pytest.mark.parametrize("options", [dict(quality=90, subsampling=0), dict(quality=90, subsampling=1),
                                     dict(quality=75, subsampling=2),
                                     dict(quality=85, progressive=True),
                                     dict(quality=60, optimize=True)])
def test_jpeg_decodes_bitwise_as_pil(options):
    for seed, (h, w) in enumerate([(128, 128), (333, 500), (481, 203), (17, 9)]):
        data = encoded(Image.fromarray(photo(h, w, seed)), "JPEG", **options)
        for out in ("RGB", "L"):
            assert np.array_equal(decode(exact(out, h, w), data), pil_chw(data, out)), (h, w, out)


def pil_draft_chw(data, mode, h, w):
    """PIL's reduced decode for a requested (h, w): im.draft("RGB", (w, h)); im.convert(mode)."""
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (w, h))
    a = np.asarray(image.convert(mode))
    return a[None] if a.ndim == 2 else a.transpose(2, 0, 1)


@pytest.mark.parametrize("options", [dict(quality=90, subsampling=0), dict(quality=90, subsampling=1),
                                     dict(quality=90, subsampling=2),
                                     dict(quality=85, progressive=True), "grey"])
def test_jpeg_draft_decodes_bitwise_as_pils_draft(options):
    # Requests from 1/8 to no reduction; the image whole through the window path (CenterCrop to
    # its own reduced size) and through the plain decode (Resize to its own size, which copies).
    compared = set()
    for seed, (h, w) in enumerate([(375, 500), (481, 203), (128, 128), (600, 599), (17, 9)]):
        image = Image.fromarray(photo(h, w, seed))
        if options == "grey":
            data = encoded(image.convert("L"), "JPEG", quality=80)
        else:
            data = encoded(image, "JPEG", **options)
        for req in [(112, 112), (64, 64), (32, 40), (200, 100), (224, 224), (8, 8)]:
            for out in ("RGB", "L"):
                theirs = pil_draft_chw(data, out, *req)
                th, tw = theirs.shape[1:]
                compared.add((w + th - 1) // th)
                for chain in ("DecodeImage(mode=%s, draft=(%d, %d)), CenterCrop((%d, %d))",
                              "DecodeImage(mode=%s, draft=(%d, %d)), Resize((%d, %d))"):
                    ours = decode(chain % ((out,) + req + (th, tw)), data)
                    assert np.array_equal(ours, theirs), (h, w, req, out, chain)
    assert {1, 2, 4, 8} <= compared  # every scale was compared


def test_draft_true_takes_the_size_of_the_op_that_makes_one():
    data = encoded(Image.fromarray(photo(375, 500, 1)), "JPEG", quality=90)
    # Resize(64): a request of (64, 64), min(500 // 64, 375 // 64) = 5: PIL drafts at 1/4.
    drafted = decode("DecodeImage(draft=True), RandomHorizontalFlip(p=0), Resize(64), "
                     "CenterCrop(64)", data)
    assert np.array_equal(drafted, decode("DecodeImage(draft=(64, 64)), Resize(64), CenterCrop(64)",
                                          data))
    assert not np.array_equal(drafted, decode("DecodeImage(), Resize(64), CenterCrop(64)", data))
    # RandomResizedCrop((96, 112)): 375 // 96 = 3, 500 // 112 = 4: 1/2.
    chain = "DecodeImage(draft=%s), RandomResizedCrop((96, 112)), RandomHorizontalFlip()"
    for index in range(5):
        assert np.array_equal(decode(chain % "True", data, index),
                              decode(chain % "(96, 112)", data, index))
    python_chain = sluice.transforms.Compose([sluice.transforms.DecodeImage(draft=True),
                                              sluice.transforms.CenterCrop(64)])
    assert "draft=True" in str(python_chain)
    with pytest.raises(ValueError, match="draft"):
        sluice.transforms.DecodeImage(draft=0)
    with pytest.raises(ValueError, match="draft"):
        sluice.transforms.DecodeImage(draft=(1, 2, 3))
    with pytest.raises(ValueError, match="draft"):
        sluice.transforms.DecodeImage(draft="yes")
    with pytest.raises(Exception, match=r"draft=True.*no Resize, RandomResizedCrop or CenterCrop"):
        decode("DecodeImage(draft=True), RandomCrop(32)", data)


def test_grey_jpeg_decodes_bitwise_as_pil():
    data = encoded(Image.fromarray(photo(64, 96)).convert("L"), "JPEG", quality=80)
    for out in ("RGB", "L"):
        assert np.array_equal(decode(exact(out, 64, 96), data), pil_chw(data, out))


# Documented tolerance (docs/transforms.md): float32 output within 2**-14 of interpolate's (values
# 0..255: 4 float32 ulps at the top; the weights are torch's exactly, the sums' rounding order
# differs); uint8 output within 1 of torchvision's round(interpolate), differing in under 0.1%
# of values (a tie rounded the other way after such an ulp).
F32_TOLERANCE = 2.0 ** -14
@pytest.mark.parametrize("size", [(224, 224), (100, 301), (500, 77), (31, 31)])
def test_resize_matches_interpolate_bilinear_without_align_corners(size):
    data = encoded(Image.fromarray(photo(333, 500, seed=4)), "PNG")
    x = torch.from_numpy(pil_chw(data, "RGB").copy())
    theirs = F.interpolate(x.float()[None], size=size, mode="bilinear", align_corners=False)[0]
    ours_f32 = decode("DecodeImage(), ToDtype(f32), Resize((%d, %d))" % size, data)
    assert np.abs(ours_f32 - theirs.numpy()).max() <= F32_TOLERANCE
    ours_u8 = decode("DecodeImage(), Resize((%d, %d))" % size, data)
    theirs_u8 = torch.round(theirs).to(torch.uint8).numpy()
    diff = np.abs(ours_u8.astype(int) - theirs_u8.astype(int))
    assert diff.max() <= 1
    assert (diff != 0).mean() < 1e-3


def test_resize_smaller_edge_has_torchvisions_size_and_values():
    import torchvision.transforms as T
    data = encoded(Image.fromarray(photo(333, 500, seed=2)), "PNG")
    x = torch.from_numpy(pil_chw(data, "RGB").copy())
    theirs = T.Resize(256, antialias=False)(x.float()).numpy()
    ours = decode("DecodeImage(), ToDtype(f32), Resize(256), CenterCrop((256, 384))", data)
    assert theirs.shape == (3, 256, 384)
    assert np.abs(ours - theirs).max() <= F32_TOLERANCE


def test_random_resized_crop_output_has_its_size_and_is_reproducible():
    data = encoded(Image.fromarray(photo(300, 400, seed=3)), "JPEG", quality=90)
    chain = "DecodeImage(), RandomResizedCrop(224), RandomHorizontalFlip()"
    a = decode(chain, data, index=11)
    assert a.shape == (3, 224, 224)
    assert np.array_equal(a, decode(chain, data, index=11))
    assert not np.array_equal(a, decode(chain, data, index=12))


def test_random_resized_crop_with_a_full_window_is_interpolate_of_the_image():
    data = encoded(Image.fromarray(photo(120, 160, seed=6)), "PNG")
    x = torch.from_numpy(pil_chw(data, "RGB").copy()).float()[None]
    theirs = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)[0].numpy()
    ours = decode("DecodeImage(), ToDtype(f32), RandomResizedCrop(64, scale=(1, 1), "
                  "ratio=(1.3333333333333333, 1.3333333333333333))", data)
    assert np.abs(ours - theirs).max() <= F32_TOLERANCE


@pytest.mark.parametrize("data,reason", [
    (b"", "empty record"),
    (b"<html>not an image</html>", r"not a JPEG \(ff d8 ff\) or PNG"),
    (None, "JPEG"),  # truncated JPEG, filled in below
])
def test_bad_records_are_refused_with_the_reason(data, reason):
    if data is None:
        full = encoded(Image.fromarray(photo(64, 64)), "JPEG")
        data = full[:len(full) // 2]
    with pytest.raises(sluice.DataLossError, match=reason):
        decode("DecodeImage(), CenterCrop(8)", data)


def test_corrupt_png_is_refused():
    data = bytearray(encoded(Image.fromarray(photo(64, 64)), "PNG"))
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(sluice.DataLossError, match="PNG"):
        decode("DecodeImage(), CenterCrop(64)", bytes(data))
    with pytest.raises(sluice.DataLossError, match="PNG"):
        decode("DecodeImage(), Resize((8, 8))", bytes(data))


def test_png_rows_below_a_crop_are_not_decoded_nor_their_damage_seen():
    # docs/transforms.md, "Decoding only the window": a PNG decodes its rows down to the crop's
    # last; damage below them is not seen (ingestion's structure check reads the whole file).
    image = photo(64, 64)
    raw = zlib.compress(b"".join(b"\x00" + image[r].tobytes() for r in range(64)), 9)
    ihdr = struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)
    head = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)
    # The compressed rows in two IDAT chunks; the second's bytes damaged (its CRC kept right,
    # as a flipped bit after the CRC was computed would not be: the inflate sees it).
    first, rest = raw[:len(raw) // 4], bytearray(raw[len(raw) // 4:])
    good = head + png_chunk(b"IDAT", first) + png_chunk(b"IDAT", bytes(rest)) + png_chunk(
        b"IEND", b"")
    top = decode("DecodeImage(), CenterCrop((4, 64))", good)
    for i in range(len(rest) // 2, len(rest)):
        rest[i] ^= 0x5A
    damaged = head + png_chunk(b"IDAT", first) + png_chunk(b"IDAT", bytes(rest)) + png_chunk(
        b"IEND", b"")
    with pytest.raises(sluice.DataLossError, match="PNG"):
        decode("DecodeImage(), CenterCrop(64)", damaged)
    # CenterCrop((4, 64)) keeps rows 30-33, inflated from the compressed data before the damage
    # (about the first 53% of it; the damage starts at 62%).
    assert np.array_equal(decode("DecodeImage(), CenterCrop((4, 64))", damaged), top)
    assert np.array_equal(top, image[30:34].transpose(2, 0, 1))


def test_image_over_the_bound_is_refused_from_its_header():
    data = encoded(Image.fromarray(photo(40, 300)), "PNG")
    with pytest.raises(sluice.DataLossError, match="declares 300x40 pixels"):
        _sluice._decode_transforms("DecodeImage(), CenterCrop(8)", data, max_side=256)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def indexed_png(depth, entries, w=19, h=13):
    """A palette PNG of `depth` bits whose indices run over every value, past its `entries`."""
    per = 8 // depth
    idx = (np.arange(w * h) * 7 % (1 << depth)).reshape(h, w)
    rows = b""
    for y in range(h):
        packed = bytearray()
        for x in range(0, w, per):
            byte = 0
            for k in range(per):
                byte = byte << depth | (int(idx[y, x + k]) if x + k < w else 0)
            packed.append(byte)
        rows += b"\0" + bytes(packed)
    plte = bytes((37 * i + 11 * c) % 256 for i in range(entries) for c in range(3))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, 3, 0, 0, 0)) +
            png_chunk(b"PLTE", plte) + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


# Issue 35: indices past a short PLTE decoded to (0, 0, 0); PIL pads the palette with a grey ramp.
@pytest.mark.parametrize("depth,entries", [(8, 10), (8, 1), (4, 3), (2, 1), (1, 1)])
def test_palette_indices_past_the_plte_decode_as_pil(depth, entries):
    data = indexed_png(depth, entries)
    for out in ("RGB", "L"):
        assert np.array_equal(decode(exact(out, 13, 19), data), pil_chw(data, out)), out


# Issue 35: a zTXt chunk inflating to 1 GiB cost ~1 GB and seconds at each decode; PIL refuses it
# ("Decompressed Data Too Large"), and so does the decoder, after at most 4 MiB inflated.
def test_png_text_chunk_decompression_bomb_is_refused():
    good = encoded(Image.fromarray(photo(13, 19)), "PNG")
    co = zlib.compressobj(9)
    bomb = b"".join(co.compress(bytes(1 << 20)) for _ in range(256)) + co.flush()
    data = good[:33] + png_chunk(b"zTXt", b"Comment\0\0" + bomb) + good[33:]
    with pytest.raises(ValueError, match="Decompressed Data Too Large"):
        Image.open(io.BytesIO(data)).convert("RGB")
    with pytest.raises(sluice.DataLossError, match="decompression bomb"):
        decode("DecodeImage(), CenterCrop(8)", data)
