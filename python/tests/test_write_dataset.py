"""sluice.write_dataset: array layouts, feature vectors and labels checked at the door."""
import json
import os
import re

import numpy as np
import pytest
import torch

import sluice


def _nchw(n=40, c=3, h=32, w=32, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, c, h, w), dtype=np.uint8)


def _files(d):
    return {name: open(os.path.join(d, name), "rb").read() for name in sorted(os.listdir(d))}


def _batches(path, batch_size=16):
    loader = sluice.Loader(path, batch_size=batch_size, shuffle=False, dtype=torch.uint8,
                           threads=1)
    return [(x.clone(), y.clone()) for x, y in loader]


def test_nchw_and_nhwc_of_the_same_images_write_byte_identical_datasets(tmp_path):
    x = _nchw()
    y = np.arange(40, dtype=np.uint8) % 10
    sluice.write_dataset(tmp_path / "nchw", "train", x, y, records_per_frame=8, layout="NCHW")
    sluice.write_dataset(tmp_path / "nhwc", "train", np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
                         y, records_per_frame=8, layout="NHWC")
    assert _files(tmp_path / "nchw") == _files(tmp_path / "nhwc")
    manifest = json.loads((tmp_path / "nchw" / "train.manifest.json").read_text())
    assert manifest["sample"] == {"dtype": "u8", "height": 32, "width": 32, "channels": 3}
    assert manifest["label"] == {"dtype": "u8", "num_classes": 10, "class_counts": [4] * 10}


def test_nchw_comes_back_as_the_same_records_and_batches(tmp_path):
    x = _nchw()
    y = np.arange(40, dtype=np.int64) % 7
    sluice.write_dataset(tmp_path, "train", x, y, layout="NCHW")
    ds = sluice.Dataset(str(tmp_path))
    assert ds.shape == (32, 32, 3)  # a record is stored (H, W, C)
    for i in range(40):
        image, label = ds[i]
        assert np.array_equal(image, x[i].transpose(1, 2, 0)) and label == y[i]
    batches = _batches(str(tmp_path))
    got = torch.cat([b[0] for b in batches])
    assert tuple(got.shape) == (40, 3, 32, 32)
    assert torch.equal(got, torch.from_numpy(x))
    assert torch.equal(torch.cat([b[1] for b in batches]), torch.from_numpy(y))


def test_nchw_without_layout_is_refused_not_misread(tmp_path):
    # Before layouts were declared this wrote 3x32 images of 32 channels, and rc 0.
    with pytest.raises(ValueError) as e:
        sluice.write_dataset(tmp_path, "train", _nchw(), np.zeros(40, np.uint8))
    message = str(e.value)
    assert "[40, 3, 32, 32]" in message
    assert "as NHWC 40 samples of 3x32 with 32 channels" in message
    assert "as NCHW 40 samples of 32x32 with 3 channels" in message
    assert 'layout="NCHW"' in message
    assert not os.path.exists(tmp_path / "train.manifest.json")


@pytest.mark.parametrize("shape", [(8, 4, 4, 3), (8, 32, 32, 16), (8, 1, 28, 28)])
def test_every_ambiguous_4d_shape_without_layout_is_refused(tmp_path, shape):
    with pytest.raises(ValueError, match="ambiguous"):
        sluice.write_dataset(tmp_path, "train", np.zeros(shape, np.uint8), np.zeros(8, np.uint8))


def test_unambiguous_channels_last_needs_no_layout(tmp_path):
    x = np.random.default_rng(1).integers(0, 256, (8, 32, 32, 3), dtype=np.uint8)
    sluice.write_dataset(tmp_path, "train", x, np.zeros(8, np.uint8))
    image, _ = sluice.Dataset(str(tmp_path))[5]
    assert np.array_equal(image, x[5])


def test_bad_layout_value_is_refused(tmp_path):
    with pytest.raises(ValueError, match="layout: expected None, 'NHWC' or 'NCHW', got 'CHW'"):
        sluice.write_dataset(tmp_path, "train", _nchw(), np.zeros(40, np.uint8), layout="CHW")


def test_feature_vectors_are_stored_as_one_row_and_come_back_as_b_1_1_d(tmp_path):
    x = np.random.default_rng(2).random((50, 20), dtype=np.float32)
    y = np.arange(50) % 3
    info = sluice.write_dataset(tmp_path, "train", x, y)
    assert info["num_classes"] == 3
    ds = sluice.Dataset(str(tmp_path))
    assert ds.shape == (1, 20, 1) and ds.dtype == "f32"  # (H, W, C)
    assert np.array_equal(ds[7][0].reshape(20), x[7])
    loader = sluice.Loader(str(tmp_path), batch_size=10, shuffle=False, threads=1)
    images, _ = next(iter(loader))
    assert tuple(images.shape) == (10, 1, 1, 20)


def test_negative_label_is_refused_naming_the_record(tmp_path):
    y = np.zeros(40, np.int64)
    y[17] = -1
    with pytest.raises(ValueError, match=re.escape("label of record 17 is -1: expected a class "
                                                   "index >= 0")):
        sluice.write_dataset(tmp_path, "train", _nchw(), y, layout="NCHW")
    assert not os.path.exists(tmp_path / "train.manifest.json")


def test_label_at_or_above_num_classes_is_refused_naming_the_record(tmp_path):
    y = np.arange(40) % 10
    y[23] = 300
    with pytest.raises(ValueError, match=re.escape("label of record 23 is 300: expected a class "
                                                   "index in [0, 10) (num_classes 10)")):
        sluice.write_dataset(tmp_path, "train", _nchw(), y, layout="NCHW", num_classes=10)
    assert not os.path.exists(tmp_path / "train.manifest.json")


def test_each_classes_records_are_counted_and_a_dataset_without_counts_says_none(tmp_path):
    labels = np.array([2, 0, 2, 2, 1, 0, 2], dtype=np.uint8)
    sluice.write_dataset(tmp_path, "train", np.zeros((7, 2, 2), np.uint8), labels, num_classes=4)
    assert sluice.Dataset(str(tmp_path)).class_counts == [2, 1, 4, 0]
    assert sluice.Loader(str(tmp_path), 2).class_counts == [2, 1, 4, 0]
    # A manifest written before label.class_counts existed: None, not a guess.
    manifest = tmp_path / "train.manifest.json"
    data = json.loads(manifest.read_text())
    del data["label"]["class_counts"]
    manifest.write_text(json.dumps(data, indent=2) + "\n")
    assert sluice.Dataset(str(tmp_path)).class_counts is None


def test_num_classes_is_recorded_as_given(tmp_path):
    info = sluice.write_dataset(tmp_path, "train", _nchw(), np.arange(40) % 4, layout="NCHW",
                                num_classes=12)
    assert info["num_classes"] == 12
    manifest = json.loads((tmp_path / "train.manifest.json").read_text())
    assert manifest["label"] == {"dtype": "i32", "num_classes": 12,
                                 "class_counts": [10] * 4 + [0] * 8}
    with pytest.raises(ValueError, match="num_classes"):
        sluice.write_dataset(tmp_path, "train", _nchw(), np.zeros(40, np.uint8), layout="NCHW",
                             num_classes=0)
