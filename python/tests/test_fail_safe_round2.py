"""The Python package under hostile input, round 2 (docs/python.md, docs/limits.md): report_html
aimed at a file of the dataset the loader reads, a probe's name of a megabyte with an ANSI
escape, and the messages of Normalize, RandomResizedCrop and write_dataset for empty or
mistyped values."""
import hashlib
import json
import os

import numpy as np
import pytest
import torch

import sluice
from sluice import transforms as T


@pytest.fixture
def dataset(tmp_path):
    """A two-split dataset of 64 4x4 u8 records each, and a loader that has run an epoch."""
    out = str(tmp_path / "ds")
    rng = np.random.default_rng(2)
    for split in ("train", "test"):
        sluice.write_dataset(out, split, rng.integers(0, 256, (64, 4, 4), dtype=np.uint8),
                             (np.arange(64) % 10).astype(np.uint8), records_per_shard=32)
    loader = sluice.Loader(out, batch_size=16, threads=1)
    for _ in loader:
        pass
    return out, loader


def _digests(folder):
    return {name: hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
            for name in sorted(os.listdir(folder))}


# report_html('ds/train.manifest.json') replaced the manifest with the page and returned
# cleanly: the dataset was gone. Every file of the dataset's folder is refused, by any spelling
# and under another name (a hard or symbolic link), and nothing is written.
def test_report_html_over_a_file_of_the_dataset_is_refused_and_the_dataset_is_intact(dataset,
                                                                                     tmp_path):
    out, loader = dataset
    manifest = json.load(open(os.path.join(out, "train.manifest.json")))
    shards = [s["file"] for s in manifest["shards"]]
    os.link(os.path.join(out, "train.manifest.json"), str(tmp_path / "hard.html"))
    os.symlink(os.path.join(out, shards[0]), str(tmp_path / "soft.html"))
    before = _digests(out)
    targets = [os.path.join(out, "train.manifest.json"),
               os.path.join(out, "..", "ds", "test.manifest.json"),
               os.path.join(out, shards[-1]), os.path.join(out, ".sluice.lock"),
               tmp_path / "hard.html", str(tmp_path / "soft.html")]
    for target in targets:
        with pytest.raises(ValueError, match=r"^report_html: path .* is a file of the dataset in "
                                             r".*: it would replace it$"):
            loader.report_html(target)
    assert _digests(out) == before
    for split in ("train", "test"):
        sluice.Dataset(out, split).verify()  # DataLossError on any damage
    assert len(list(sluice.Loader(out, batch_size=16, threads=1))) == 4
    # A page beside the data is written.
    page = loader.report_html(os.path.join(out, "report.html"))
    assert open(page).read().startswith("<!DOCTYPE html>")


# sluice.probe(it, name='\x1b[2J' + 'N' * 10**6).report_text() was 2 MB with a raw ESC (the
# name twice, never cut); a class's __qualname__ the same. Both are bounded and escaped in the
# text, and bounded (escaped by the JSON writer) in report().
@pytest.mark.parametrize("via", ["name", "qualname"])
def test_a_probe_name_of_a_megabyte_with_an_escape_is_bounded_and_escaped(via):
    hostile = "\x1b[2J" + "N" * 10**6
    batches = [torch.zeros(8, 2) for _ in range(4)]
    if via == "name":
        p = sluice.probe(batches, name=hostile)
    else:
        Loader = type("Loader", (), {"__iter__": lambda self: iter(batches)})
        Loader.__qualname__ = hostile
        p = sluice.probe(Loader())
    for _ in p:
        pass
    text = p.report_text()
    assert "\x1b" not in text
    assert len(text) < 20000
    assert "\\x1b[2JNNN" in text and "bytes)" in text
    report = p.report()
    assert len(json.dumps(report)) < 40000
    assert report["probe"]["loader"].endswith("(%d bytes)" % len(
        (hostile if via == "name" else "%s.%s" % (__name__, hostile)).encode()))


def test_a_probe_name_that_is_not_a_str_is_a_type_error():
    with pytest.raises(TypeError, match=r"^name: expected a str or None, got 42 \(int\)$"):
        sluice.probe([], name=42)


# Normalize([], []) said "could not convert string to float: ''".
@pytest.mark.parametrize("mean, std, which", [([], [], "mean"), ((0.5,), (), "std"),
                                              (torch.tensor([]), 1, "mean")])
def test_normalize_with_an_empty_mean_or_std_says_one_value_per_channel(mean, std, which):
    with pytest.raises(ValueError, match=r"^%s: must have one value per channel \(at least one\)"
                                         % which):
        T.Normalize(mean, std)


# RandomResizedCrop(8, scale=("0.1", "1")) said "'<' not supported between instances of 'int'
# and 'str'".
@pytest.mark.parametrize("scale", [("0.1", "1"), (0.1, None), 0.5, "ab"])
def test_random_resized_crop_with_a_scale_that_is_not_numbers_is_a_type_error_naming_it(scale):
    with pytest.raises(TypeError, match=r"^scale: expected \(lo, hi\), two numbers, got "):
        T.RandomResizedCrop(8, scale=scale)
    with pytest.raises(TypeError, match=r"^ratio: expected \(lo, hi\), two numbers"):
        T.RandomResizedCrop(8, ratio=[1, "2"])
    assert str(T.RandomResizedCrop(8, scale=np.array([0.5, 1.0]))) == \
        "RandomResizedCrop(8, scale=[0.5, 1.0], ratio=[0.75, 1.3333333333333333])"


# write_dataset(out, 'train', [], []) said "labels: dtype must be ..., got float64".
def test_write_dataset_of_zero_records_says_so_naming_images(tmp_path):
    out = str(tmp_path / "ds")
    for images in ([], (), np.zeros((0, 4, 4), np.uint8)):
        with pytest.raises(ValueError, match=r"^images: zero records \(.*\); a split needs at "
                                             r"least one image"):
            sluice.write_dataset(out, "train", images, [])
    with pytest.raises(ValueError, match=r"^labels: zero labels for 3 images; expected one label "
                                         r"per image"):
        sluice.write_dataset(out, "train", np.zeros((3, 4, 4), np.uint8), [])
    assert not os.path.exists(os.path.join(out, "train.manifest.json"))


# Normalize(1e39, 1) said "got mean [inf]" and Normalize(0, 1e-320) "std [0]": the values after
# their conversion to float32. The C++ message (shared with sluice-train --transforms) names
# them as given.
@pytest.mark.parametrize("mean, std, expected", [
    (1e39, 1, r"Normalize argument 'mean'.*: 1e\+39 is outside float32's range"),
    (0, 1e-320, r"Normalize argument 'std'.*: 1e-320 rounds to 0 in float32")])
def test_normalize_values_float32_cannot_hold_are_named_as_given(dataset, mean, std, expected):
    out, _ = dataset
    with pytest.raises(ValueError, match=expected) as raised:
        sluice.Loader(out, batch_size=16, threads=1, transforms=[T.Normalize(mean, std)])
    assert "[inf]" not in str(raised.value) and "[0]" not in str(raised.value)
