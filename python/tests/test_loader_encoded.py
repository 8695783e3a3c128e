"""sluice.Loader on a dataset of encoded images (JPEG/PNG bytes from write_dataset): the same
transforms API as for fixed-size data, batches [B, C, H, W] equal to PIL's decode followed by
torchvision's Resize and CenterCrop, the same for 1 and 2 threads and after a mid-epoch resume;
a chain that does not decode first is refused at construction saying what to add."""
import io
import json
import re

import numpy as np
import pytest
import torch
import torchvision.transforms as TV

import sluice
import sluice.transforms as T

PIL = pytest.importorskip("PIL.Image")
RECORDS, BATCH = 37, 8


def _encoded(array, fmt):
    buf = io.BytesIO()
    PIL.fromarray(array).save(buf, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buf.getvalue()


@pytest.fixture
def images(tmp_path):
    """RECORDS images of their own sizes (grey and RGB PNGs, JPEGs), written unshuffled."""
    rng = np.random.default_rng(11)
    data = []
    for i in range(RECORDS):
        a = rng.integers(0, 256, (14 + i % 9, 17 + i % 5, 3), dtype=np.uint8)
        data.append(_encoded(a[:, :, 0], "PNG") if i % 3 == 0 else
                    _encoded(a, "PNG") if i % 3 == 1 else _encoded(a, "JPEG"))
    labels = (np.arange(RECORDS) % 5).astype(np.uint8)
    sluice.write_dataset(tmp_path, "train", data, labels, records_per_frame=6)
    return {"dir": str(tmp_path), "data": data, "labels": labels}


def _pil_reference(data, transforms):
    """An ImageFolder's sample: PIL's decode, then torchvision's transforms on the PIL image."""
    return TV.PILToTensor()(transforms(PIL.open(io.BytesIO(data)).convert("RGB")))


def _chain():
    return [T.DecodeImage(), TV.Resize((12, 12)), TV.CenterCrop(10)]


def _batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


@pytest.mark.parametrize("threads", [1, 2])
def test_batches_equal_pil_decode_then_resize_and_center_crop(images, threads):
    loader = sluice.Loader(images["dir"], batch_size=BATCH, dtype=torch.uint8,
                           transforms=_chain(), threads=threads)
    # torchvision's objects in a list without ToTensor resized PIL images in the user's
    # ImageFolder: the same pixels, bitwise.
    tv = TV.Compose([TV.Resize((12, 12)), TV.CenterCrop(10)])
    position = 0
    for x, y in loader:
        assert x.dtype == torch.uint8 and tuple(x.shape[1:]) == (3, 10, 10)
        for i in range(x.shape[0]):
            want = _pil_reference(images["data"][position + i], tv)
            assert torch.equal(x[i], want), position + i
        np.testing.assert_array_equal(y.numpy(),
                                      images["labels"][position:position + x.shape[0]])
        position += x.shape[0]
    assert position == RECORDS


# The first chain decodes every image whole, op by op; the second takes the fused path (decode,
# crop and flip in one pass), the third decodes only what Resize then CenterCrop reads: they
# time the decode for the row alike.
@pytest.mark.parametrize("fused", [False, True, "resize-crop"])
def test_report_has_a_decode_row_inside_preprocess(images, fused):
    chain = ([T.DecodeImage(), TV.RandomResizedCrop(10), TV.RandomHorizontalFlip()] if fused is True
             else _chain() if fused else [T.DecodeImage(), TV.Resize((12, 12))])
    loader = sluice.Loader(images["dir"], batch_size=BATCH, dtype=torch.uint8,
                           transforms=chain, threads=1)
    for _ in loader:
        pass
    report = loader.report()
    rows = {row["stage"]: row for row in report["stages"]}
    decode, pre = rows["decode"], rows["preprocess"]
    assert decode["present"] and decode["items"] == RECORDS and decode["samples"] == RECORDS
    assert not decode["cpu_work"]  # counted in preprocess's
    assert 0 < decode["busy_ns"] <= pre["busy_ns"]
    assert 0 < decode["busy_pct"] <= pre["busy_pct"] <= 100
    # Stored bytes: each image's height x width x 3 (RGB). Decoded: all of it op by op; on the
    # windowed paths only the iMCU rows and columns of each JPEG's window, and a PNG's rows down
    # to the window's last (docs/transforms.md, "Decoding only the window"), never more.
    shapes = [np.array(PIL.open(io.BytesIO(d)).convert("RGB")).size for d in images["data"]]
    assert decode["stored_bytes"] == sum(shapes)
    if fused:
        assert 0 < decode["bytes"] <= decode["stored_bytes"]
    else:
        assert decode["bytes"] == sum(shapes)
    assert "decode runs inside preprocess" in loader.report_text()


def test_shuffled_batches_are_the_same_for_one_and_two_threads_and_after_a_resume(images):
    def make(threads):
        return sluice.Loader(images["dir"], batch_size=BATCH, shuffle=True, seed=5,
                             transforms=[T.DecodeImage(), T.RandomResizedCrop(8),
                                         T.RandomHorizontalFlip()], threads=threads)

    one, two = make(1), make(2)
    ones = _batches(one) + _batches(one)  # epochs 0 and 1
    both = _batches(two) + _batches(two)
    assert len(ones) == len(both) == 2 * 5
    for (x, y), (bx, by) in zip(ones, both):
        assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 8, 8)
        assert torch.equal(x, bx) and torch.equal(y, by)
    first = make(2)
    for i, _ in enumerate(first):
        if i == 2:
            break
    state = first.state_dict()
    assert state["step"] == 3 and state["order"]["transforms"].startswith("DecodeImage(")
    resumed = make(1)
    resumed.load_state_dict(state)
    rest = _batches(resumed)
    assert len(rest) == 2
    for (x, y), (ex, ey) in zip(rest, ones[3:5]):
        assert torch.equal(x, ex) and torch.equal(y, ey)


@pytest.mark.parametrize("transforms, message", [
    (None, "transforms is empty; set transforms starting with DecodeImage()"),
    ([TV.Resize((8, 8))], "but the chain starts with Resize("),
])
def test_encoded_images_without_a_decoding_chain_are_refused(images, transforms, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        sluice.Loader(images["dir"], batch_size=BATCH, transforms=transforms)


def test_a_corrupt_image_raises_naming_the_record_or_is_skipped(tmp_path):
    good = _encoded(np.zeros((9, 9, 3), dtype=np.uint8), "PNG")
    data = [good] * 5 + [good[:40]] + [good] * 4  # record 5: a truncated PNG
    sluice.write_dataset(tmp_path, "train", data, np.zeros(10, dtype=np.uint8),
                         verify_images=None)  # stored damaged on purpose
    chain = [T.DecodeImage(), T.Resize((4, 4))]
    with pytest.raises(Exception, match=r"\.shard: record 5: DecodeImage\(mode=RGB\): "):
        _batches(sluice.Loader(str(tmp_path), batch_size=4, transforms=chain))
    loader = sluice.Loader(str(tmp_path), batch_size=4, transforms=chain, on_corrupt="skip",
                           max_corrupt_fraction=0.5)
    # The sample is dropped from its batch; the others keep their place.
    assert [x.shape[0] for x, _ in loader] == [4, 3, 2]
    skipped = loader.skipped()
    assert skipped["records"] == 1
    assert "record 5: DecodeImage(mode=RGB): " in skipped["messages"][0]


def test_a_corrupt_image_is_named_by_its_source_when_the_manifest_records_it(tmp_path):
    good = _encoded(np.zeros((9, 9, 3), dtype=np.uint8), "PNG")
    data = [good] * 5 + [good[:40]] + [good] * 4  # record 5: a truncated PNG
    sources = ["cls/%02d.png" % i for i in range(10)]
    sluice.write_dataset(tmp_path, "train", data, np.zeros(10, dtype=np.uint8), sources=sources,
                         verify_images=None)  # stored damaged on purpose
    manifest = json.loads((tmp_path / "train.manifest.json").read_text())
    assert manifest["record_sources"] == sources
    chain = [T.DecodeImage(), T.Resize((4, 4))]
    with pytest.raises(sluice.DataLossError,
                       match=r"\.shard: record 5 \(cls/05\.png\): DecodeImage\(mode=RGB\): "):
        _batches(sluice.Loader(str(tmp_path), batch_size=4, transforms=chain))
    loader = sluice.Loader(str(tmp_path), batch_size=4, transforms=chain, on_corrupt="skip",
                           max_corrupt_fraction=0.5)
    _batches(loader)
    assert "record 5 (cls/05.png): DecodeImage(mode=RGB): " in loader.skipped()["messages"][0]


def test_the_manifest_bounds_decoded_images_and_a_larger_one_is_a_data_error(tmp_path):
    rng = np.random.default_rng(5)
    sizes = [(20, 30), (41, 12), (8, 8)]  # (height, width): the box is 41 high, 30 wide
    data = [_encoded(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "PNG") for h, w in sizes]
    sluice.write_dataset(tmp_path, "train", data, np.zeros(3, dtype=np.uint8))
    path = tmp_path / "train.manifest.json"
    manifest = json.loads(path.read_text())
    assert (manifest["sample"]["max_width"], manifest["sample"]["max_height"],
            manifest["sample"]["max_pixels"], manifest["sample"]["max_pixels_record"]) == \
        (30, 41, 600, 0)
    chain = [T.DecodeImage(), T.Resize((4, 4))]
    assert sum(x.shape[0] for x, _ in sluice.Loader(str(tmp_path), batch_size=2,
                                                    transforms=chain)) == 3
    # A manifest whose bound is smaller than a record: that record is refused from its header.
    manifest["sample"]["max_height"] = 40
    manifest["sample"]["max_pixels"] = 40 * 30
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    with pytest.raises(sluice.DataLossError,
                       match=r"record 1: DecodeImage\(mode=RGB\): PNG declares 12x41 pixels "
                             r"\(width x height\), over the bound of 30x40"):
        _batches(sluice.Loader(str(tmp_path), batch_size=2, transforms=chain, shuffle=False))
    # Without the fields (a manifest written before them), the default bound (4096) applies.
    for key in ("max_width", "max_height", "max_pixels", "max_pixels_record"):
        del manifest["sample"][key]
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    assert sum(x.shape[0] for x, _ in sluice.Loader(str(tmp_path), batch_size=2,
                                                    transforms=chain)) == 3


def test_dataset_sources_are_the_recorded_files_or_none(tmp_path):
    good = _encoded(np.zeros((9, 9, 3), dtype=np.uint8), "PNG")
    sluice.write_dataset(tmp_path / "a", "train", [good] * 3, np.zeros(3, dtype=np.uint8),
                         sources=["x/0.png", "x/1.png", "y/2.png"])
    assert sluice.Dataset(str(tmp_path / "a")).sources == ["x/0.png", "x/1.png", "y/2.png"]
    sluice.write_dataset(tmp_path / "b", "train", [good] * 3, np.zeros(3, dtype=np.uint8))
    assert sluice.Dataset(str(tmp_path / "b")).sources is None
    with pytest.raises(TypeError, match="sources: expected a list of 3 str"):
        sluice.write_dataset(tmp_path / "c", "train", [good] * 3, np.zeros(3, dtype=np.uint8),
                             sources=["one"])
