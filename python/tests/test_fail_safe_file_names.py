"""Hostile input, round 4 (issue 35): file names that are not UTF-8. Python spells such a name
with surrogate escapes (PEP 383: os.listdir, os.walk, sys.argv give "caf\\udce9" for a Latin-1
"caf\\xe9"); pybind11 refused those strings with "incompatible function arguments" (echoing
every image it was given) or "Unable to cast Python instance to C++ type"."""
import io
import os

import numpy as np
import pytest
from PIL import Image

import sluice


@pytest.fixture
def latin1_dataset(tmp_path):
    """A dataset of 8 4x4 u8 records whose directory's name is Latin-1, and that name as
    os.listdir gives it."""
    root = os.fsencode(str(tmp_path))
    sluice.write_dataset(str(tmp_path / "plain"), "train",
                         np.arange(8 * 16, dtype=np.uint8).reshape(8, 4, 4), np.arange(8) % 3)
    os.rename(root + b"/plain", root + b"/caf\xe9")
    (name,) = os.listdir(str(tmp_path))
    assert name == "caf\udce9"
    return os.path.join(str(tmp_path), name)


def test_a_loader_opens_a_dataset_in_a_folder_whose_name_is_not_utf8(latin1_dataset):
    loader = sluice.Loader(latin1_dataset, batch_size=4, split="train")
    labels = [int(v) for _, y in loader for v in y]
    assert labels == [i % 3 for i in range(8)]


def test_sluice_dataset_opens_a_folder_whose_name_is_not_utf8(latin1_dataset):
    ds = sluice.Dataset(latin1_dataset, split="train")
    assert len(ds) == 8
    assert int(ds[5][1]) == 5 % 3


def test_write_dataset_writes_into_a_folder_whose_name_is_not_utf8(latin1_dataset):
    info = sluice.write_dataset(latin1_dataset, "test", np.zeros((2, 4, 4), np.uint8), [0, 1])
    assert info["records"] == 2
    assert os.path.exists(os.fsencode(latin1_dataset) + b"/test.manifest.json")


def test_report_html_writes_to_a_name_that_is_not_utf8(latin1_dataset, tmp_path):
    loader = sluice.Loader(latin1_dataset, batch_size=4, split="train")
    for _ in loader:
        pass
    target = os.path.join(str(tmp_path), "r\udce9.html")
    assert loader.report_html(target) == target
    assert os.path.getsize(os.fsencode(str(tmp_path)) + b"/r\xe9.html") > 0


def test_a_message_naming_a_file_that_is_not_utf8_reaches_python_whole(tmp_path):
    missing = os.path.join(str(tmp_path), "caf\udce9")
    with pytest.raises(FileNotFoundError, match=r"caf\\xe9"):
        sluice.Loader(missing, batch_size=4, split="train")


@pytest.mark.parametrize("call", ["loader_split", "dataset_split", "write_split", "transforms",
                                  "device"])
def test_text_with_a_lone_surrogate_is_a_value_error_naming_the_argument(latin1_dataset, call):
    bad = "caf\udce9"
    calls = {
        "loader_split": lambda: sluice.Loader(latin1_dataset, batch_size=4, split=bad),
        "dataset_split": lambda: sluice.Dataset(latin1_dataset, split=bad),
        "write_split": lambda: sluice.write_dataset(latin1_dataset, bad,
                                                    np.zeros((2, 4, 4), np.uint8), [0, 1]),
        "transforms": lambda: sluice.Loader(latin1_dataset, batch_size=4, split="train",
                                            transforms="CenterCrop(2) " + bad),
        "device": lambda: sluice.Loader(latin1_dataset, batch_size=4, split="train", device=bad),
    }
    with pytest.raises(ValueError) as e:
        calls[call]()
    assert "incompatible" not in str(e.value) and "Unable to cast" not in str(e.value)
    assert "surrogate" in str(e.value) or "caf" in str(e.value)


def test_a_surrogate_no_file_name_gives_is_a_value_error_for_a_path(tmp_path):
    with pytest.raises(ValueError, match=r"path: .*lone surrogate"):
        sluice.Loader(str(tmp_path) + "/x\ud800", batch_size=4)


def _png(seed):
    b = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
        b, "PNG")
    return b.getvalue()


def test_write_dataset_records_class_and_source_names_that_are_not_utf8_as_the_cli_does(tmp_path):
    import json
    images = [_png(i) for i in range(3)]
    sluice.write_dataset(str(tmp_path / "ds"), "train", images, [0, 1, 1],
                         classes=["caf\udce9", "b\\c"],
                         sources=["x/caf\udce9.png", "x/b.png", "x/c.png"])
    manifest = json.load(open(tmp_path / "ds" / "train.manifest.json"))
    assert manifest["label"]["classes"] == ["caf\\xe9", "b\\c"]
    assert manifest["record_sources"] == ["x/caf\\xe9.png", "x/b.png", "x/c.png"]


def test_class_names_recorded_alike_are_refused_naming_both(tmp_path):
    with pytest.raises(ValueError, match=r"classes\[0\] and classes\[1\]"):
        sluice.write_dataset(str(tmp_path / "ds"), "train", [_png(0), _png(1)], [0, 1],
                             classes=["caf\\xe9", "caf\udce9"])
    assert not os.path.exists(tmp_path / "ds")


def test_a_bad_source_name_is_refused_in_a_short_message_without_the_images(tmp_path):
    big = _png(0) + b"\0" * (1 << 20)  # a PNG with a trailing MiB: echoing it would show
    with pytest.raises(ValueError) as e:
        sluice.write_dataset(str(tmp_path / "ds"), "train", [big] * 4, [0, 1, 1, 0],
                             sources=["a\ud800.png", "b.png", "c.png", "d.png"])
    assert "sources[0]" in str(e.value)
    assert len(str(e.value)) < 1000


def test_an_object_array_of_images_says_to_pass_a_list_of_bytes(tmp_path):
    images = np.array([_png(0), _png(1)], dtype=object)
    with pytest.raises(ValueError, match="got object .*a list of bytes"):
        sluice.write_dataset(str(tmp_path / "ds"), "train", images, [0, 1])


def test_report_html_to_a_dash_is_refused_not_a_file_named_dash(latin1_dataset, tmp_path,
                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    loader = sluice.Loader(latin1_dataset, batch_size=4, split="train")
    for _ in loader:
        pass
    with pytest.raises(ValueError, match="stdout on sluice-train's command line"):
        loader.report_html("-")
    assert not os.path.exists(tmp_path / "-")
