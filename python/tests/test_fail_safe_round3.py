"""Hostile input, round 3 (issue 35): split names no reader accepts, and messages that named the
wrong thing (a replaced iterator, a state's record count given as a str, a number that
underflows)."""
import os

import numpy as np
import pytest
import torch

import sluice
from sluice import transforms as T


@pytest.fixture
def dataset(tmp_path):
    """A dataset of 64 4x4 u8 records in split train."""
    out = str(tmp_path / "ds")
    rng = np.random.default_rng(3)
    sluice.write_dataset(out, "train", rng.integers(0, 256, (64, 4, 4), dtype=np.uint8),
                         (np.arange(64) % 10).astype(np.uint8), records_per_shard=32)
    return out


# "." and ".." were written (".manifest.json", "...manifest.json") and every reader refused them;
# 300 bytes failed half way with "File name too long". Refused before anything is created.
@pytest.mark.parametrize("split, message", [
    (".", "expected a plain name such as train"),
    ("..", "expected a plain name such as train"),
    ("a" * 218, "218 bytes, expected at most 217"),
    ("a" * 300, "300 bytes, expected at most 217")])
@pytest.mark.parametrize("encoded", [False, True])
def test_write_dataset_refuses_a_split_name_no_reader_accepts_creating_nothing(
        tmp_path, split, message, encoded):
    out = str(tmp_path / "ds")
    if encoded:
        jpeg = b"\xff\xd8\xff" + b"\x00" * 16
        images, labels = [jpeg, jpeg], [0, 1]
    else:
        images, labels = np.zeros((2, 4, 4), np.uint8), [0, 1]
    with pytest.raises(ValueError, match=message):
        sluice.write_dataset(out, split, images, labels)
    assert not os.path.exists(out)


def test_the_longest_split_name_is_written_and_read_back(tmp_path):
    out = str(tmp_path / "ds")
    split = "b" * 217
    sluice.write_dataset(out, split, np.zeros((2, 4, 4), np.uint8), [0, 1])
    assert len(sluice.Dataset(out, split=split)) == 2


def test_an_iterator_replaced_by_a_newer_iter_says_so(dataset):
    # It raised RuntimeError "the pipeline was cancelled".
    loader = sluice.Loader(dataset, batch_size=4, threads=1, shuffle=False)
    first = iter(loader)
    next(first)
    second = iter(loader)
    with pytest.raises(RuntimeError, match=r"replaced by a newer iter\(\) of the same Loader"):
        for _ in first:
            pass
    # The new pass goes on from where the replaced one stopped: the epoch's other 60 records.
    assert sum(len(labels) for _, labels in second) == 60


@pytest.mark.parametrize("records", ["64", 64.0, True])
def test_load_state_dict_with_records_not_an_int_says_so_showing_the_value(dataset, records):
    # A str '64' said "... 64 records) than this loader's (..., 64 records)".
    loader = sluice.Loader(dataset, batch_size=4, threads=1)
    state = loader.state_dict()
    state["dataset"] = dict(state["dataset"], records=records)
    with pytest.raises(TypeError, match=r"records'\]: expected an int, got %s"
                       % repr(records).replace(".", r"\.")):
        loader.load_state_dict(state)


# The --transforms grammar said "expected a number" for 1e-400, which Python reads as 0.0.
@pytest.mark.parametrize("transforms", ["RandomHorizontalFlip(p=1e-400)",
                                        [T.RandomHorizontalFlip(p=1e-400)]])
def test_a_probability_that_underflows_is_zero_in_the_grammar_as_in_python(dataset, transforms):
    loader = sluice.Loader(dataset, batch_size=64, threads=1, shuffle=False,
                           transforms=transforms, dtype=torch.uint8)
    images, _ = next(iter(loader))
    plain, _ = next(iter(sluice.Loader(dataset, batch_size=64, threads=1, shuffle=False,
                                       dtype=torch.uint8)))
    assert torch.equal(images, plain)  # p=0: nothing flipped
