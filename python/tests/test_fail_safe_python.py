"""The Python package under a careless caller: epochs taken without StopIteration, report_html
given a non-path, a directory or a missing directory, write_dataset given a broadcast or
strided array far larger than memory, and sluice.probe given 0-d tensors (docs/python.md)."""
import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import sluice

RECORDS, BATCH = 10000, 1000  # 10 batches per epoch


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """10,000 4x4 u8 records with distinct values, batch 1000 (10 steps an epoch)."""
    out = str(tmp_path_factory.mktemp("small"))
    rng = np.random.default_rng(35)
    images = rng.integers(0, 256, (RECORDS, 4, 4), dtype=np.uint8)
    sluice.write_dataset(out, "train", images, (np.arange(RECORDS) % 10).astype(np.uint8),
                         records_per_frame=100)
    return out


def _loader(path):
    return sluice.Loader(path, batch_size=BATCH, shuffle=True, seed=7, threads=2,
                         dtype=torch.uint8)


def _epoch(path, epoch, start_step=0):
    """The batches of `epoch` (from `start_step`) as a fresh loader delivers them."""
    loader = _loader(path)
    loader.set_epoch(epoch)
    return [x.clone() for x, _ in itertools.islice(loader, start_step, None)]


def _take_all_without_stop_iteration(loader, pattern):
    """Exactly len(loader) batches, the loop never seeing StopIteration."""
    if pattern == "zip":
        return [x.clone() for _, (x, _) in zip(range(len(loader)), loader)]
    if pattern == "islice":
        return [x.clone() for x, _ in itertools.islice(loader, len(loader))]
    got = []
    for i, (x, _) in enumerate(loader):  # "break_on_last_step"
        got.append(x.clone())
        if i == len(loader) - 1:
            break
    return got


def _same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# Taking exactly len(L) batches (zip, islice, a break on the last step) completed the epoch in
# the data but not in the loader: the next `for` resumed at its end and gave 0 batches
# (10/0/10 per epoch; DataLoader 10/10/10).
@pytest.mark.parametrize("pattern", ["zip", "islice", "break_on_last_step"])
def test_an_epoch_taken_to_its_last_batch_without_stop_iteration_is_complete(small, pattern):
    loader = _loader(small)
    for epoch in range(3):
        assert loader.state_dict()["epoch"] == epoch and loader.state_dict()["step"] == 0
        got = _take_all_without_stop_iteration(loader, pattern)
        assert len(got) == len(loader) == RECORDS // BATCH, "epoch %d" % epoch
        assert _same(got, _epoch(small, epoch)), "epoch %d is not its own order" % epoch
        state = loader.state_dict()
        assert (state["epoch"], state["step"]) == (epoch + 1, 0)
    # A plain loop afterwards delivers the next epoch whole, and ends as usual.
    got = [x.clone() for x, _ in loader]
    assert _same(got, _epoch(small, 3))
    assert (loader.state_dict()["epoch"], loader.state_dict()["step"]) == (4, 0)


def test_a_break_before_the_last_batch_still_continues_that_epoch(small):
    loader = _loader(small)
    first = [x.clone() for x, _ in itertools.islice(loader, 4)]
    assert (loader.state_dict()["epoch"], loader.state_dict()["step"]) == (0, 4)
    rest = [x.clone() for x, _ in loader]
    assert len(rest) == 6
    assert _same(first + rest, _epoch(small, 0))
    assert len([1 for _ in loader]) == 10  # then epoch 1, whole


@pytest.mark.parametrize("stop_at", [0, 3])
def test_the_state_after_an_epoch_taken_with_zip_resumes_exactly(small, stop_at):
    loader = _loader(small)
    _take_all_without_stop_iteration(loader, "zip")
    for _ in itertools.islice(loader, stop_at):  # and part of epoch 1 (or none of it)
        pass
    state = loader.state_dict()
    assert (state["epoch"], state["step"]) == ((1, 3) if stop_at else (1, 0))
    resumed = _loader(small)
    resumed.load_state_dict(state)
    expected = [x.clone() for x, _ in loader]
    got = [x.clone() for x, _ in resumed]
    assert len(got) == 10 - stop_at
    assert _same(got, expected)
    assert _same(got, _epoch(small, 1, stop_at))


def test_max_corrupt_fraction_of_an_epoch_taken_with_zip_is_checked_when_the_next_starts(
        small, tmp_path):
    import json
    import shutil
    dst = tmp_path / "one_corrupt_frame"
    shutil.copytree(small, dst)
    shard = dst / json.loads((dst / "train.manifest.json").read_text())["shards"][0]["file"]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x5A  # a frame in the middle: 100 of 10,000 records, not the last
    shard.write_bytes(bytes(data))
    loader = sluice.Loader(str(dst), batch_size=BATCH, threads=2, on_corrupt="skip",
                           max_corrupt_fraction=0.005)
    assert len(_take_all_without_stop_iteration(loader, "zip")) == 10
    with pytest.raises(sluice.DataLossError, match=r"100 of 10000 records read in epoch 0 were "
                                                   r"skipped as corrupt"):
        iter(loader)
    assert loader.skipped()["records"] == 100  # the report is still the epoch's
    assert (loader.state_dict()["epoch"], loader.state_dict()["step"]) == (1, 0)
    loader = sluice.Loader(str(dst), batch_size=BATCH, threads=2, on_corrupt="skip",
                           max_corrupt_fraction=0.02)
    for _ in range(2):
        assert len(_take_all_without_stop_iteration(loader, "zip")) == 10


def test_report_html_after_an_epoch_taken_with_zip_writes_the_page(small, tmp_path):
    loader = _loader(small)
    _take_all_without_stop_iteration(loader, "zip")
    for _ in loader:
        pass
    page = open(loader.report_html(tmp_path / "r.html")).read()
    assert page.startswith("<!DOCTYPE html>") or "<html" in page


# report_html(None) wrote a file named "None" in the current directory (str(path)); a
# directory was a RuntimeError from the rename; bytes wrote a file named "b'...'".
@pytest.mark.parametrize("path", [None, b"report.html", 5, ["report.html"]])
def test_report_html_refuses_a_non_path_and_writes_nothing(small, tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    loader = _loader(small)
    next(iter(loader))
    with pytest.raises(TypeError, match=r"^report_html: path: expected a str or os\.PathLike"):
        loader.report_html(path)
    assert os.listdir(tmp_path) == []


def test_report_html_to_a_directory_is_an_is_a_directory_error_naming_it(small, tmp_path):
    loader = _loader(small)
    next(iter(loader))
    target = tmp_path / "reports"
    target.mkdir()
    with pytest.raises(IsADirectoryError, match="report_html: path: '%s' is a directory"
                       % str(target)):
        loader.report_html(target)
    assert os.listdir(tmp_path) == ["reports"] and os.listdir(target) == []


def test_report_html_into_a_missing_directory_is_a_file_not_found_error_naming_it(small,
                                                                                 tmp_path):
    loader = _loader(small)
    next(iter(loader))
    missing = tmp_path / "no" / "such"
    with pytest.raises(FileNotFoundError, match="the directory '%s' of '%s' does not exist"
                       % (missing, missing / "r.html")):
        loader.report_html(str(missing / "r.html"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="'%s', the directory of" % (tmp_path / "file")):
        loader.report_html(tmp_path / "file" / "r.html")
    with pytest.raises(ValueError, match="the path is empty"):
        loader.report_html("")
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_report_html_refuses_a_nul_in_the_path_instead_of_writing_its_prefix(small, tmp_path):
    loader = _loader(small)
    next(iter(loader))
    with pytest.raises(ValueError, match="contains a NUL character"):
        loader.report_html(str(tmp_path / "a.html\0b"))
    assert os.listdir(tmp_path) == []


def test_an_echoed_path_is_bounded_to_200_characters_and_its_length(small, tmp_path):
    loader = _loader(small)
    next(iter(loader))
    path = str(tmp_path / ("d" * 5000) / "r.html")
    with pytest.raises(FileNotFoundError) as e:
        loader.report_html(path)
    message = str(e.value)
    assert len(message) < 700 and "... (%d characters)" % len(path) in message
    path = str(tmp_path / ("n" * 5000 + ".html"))  # a name too long: the kernel refuses it
    with pytest.raises(OSError, match="File name too long|file name of") as e:
        loader.report_html(path)
    assert len(str(e.value)) < 700 and "... (%d characters)" % len(path) in str(e.value)
    with pytest.raises(TypeError) as e:
        loader.report_html(b"x" * 100000)
    assert len(str(e.value)) < 400 and "... (100000 bytes)" in str(e.value)


# sluice.probe on a 0-d tensor said "no tensor or array in it".
@pytest.mark.parametrize("batch", [torch.tensor(1.0), (torch.tensor(1), torch.tensor(2)),
                                   {"loss": np.array(1.0, dtype=np.float32)}])
def test_probe_of_0d_tensors_says_they_have_no_batch_dimension(batch):
    p = sluice.probe([batch, batch])
    with pytest.raises(ValueError, match=r"0-d (Tensor|ndarray) \(shape \(\)\): a 0-d tensor has "
                                         r"no batch dimension\); pass batch_size="):
        for _ in p:
            pass


def test_probe_of_a_batch_without_tensors_still_says_so():
    with pytest.raises(ValueError, match=r"type str \(no tensor or array in it\)"):
        for _ in sluice.probe(["a", "b"]):
            pass


# write_dataset copied the whole array (py::array::ensure(c_style), then into a std::string):
# a broadcast (100000, 1000, 1000) array segfaulted (the copy's allocation failed and its null
# data was read), and (10000, 1000, 1000) needed 19.8 GB resident.
STRIDED_CASES = {
    "broadcast": lambda a: np.broadcast_to(a[:1], a.shape),
    "negative_strides": lambda a: a[::-1, :, ::-1],
    "fortran_order": np.asfortranarray,
    "sliced": lambda a: np.concatenate([a, a], axis=2)[:, :, ::2],
    "read_only": lambda a: _read_only(a),
    "broadcast_channels": lambda a: np.broadcast_to(a[..., :1], a.shape),
}


def _read_only(a):
    b = a.copy()
    b.flags.writeable = False
    return b


def _files(path):
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))
            if not n.startswith(".")}


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("case", sorted(STRIDED_CASES))
def test_a_strided_array_writes_the_bytes_of_its_contiguous_copy(tmp_path, case, dtype):
    rng = np.random.default_rng(6)
    base = rng.integers(0, 256, (300, 6, 5, 3)).astype(dtype)
    images = STRIDED_CASES[case](base)
    labels = (np.arange(300) % 7).astype(np.uint8)
    sluice.write_dataset(str(tmp_path / "strided"), "train", images, labels,
                         records_per_frame=16, records_per_shard=128)
    sluice.write_dataset(str(tmp_path / "copy"), "train", np.ascontiguousarray(images), labels,
                         records_per_frame=16, records_per_shard=128)
    assert _files(tmp_path / "strided") == _files(tmp_path / "copy")
    ds = sluice.Dataset(str(tmp_path / "strided"))
    stored, got_labels = ds[:]
    np.testing.assert_array_equal(stored, images)
    np.testing.assert_array_equal(got_labels, labels)


@pytest.mark.parametrize("shape,layout,make", [
    ((200, 3, 6, 5), "NCHW", lambda a: np.broadcast_to(a[:1], a.shape)),
    ((200, 3, 6, 5), "NCHW", lambda a: a[::-1, ::-1]),
    ((200, 3, 6, 5), "NCHW", np.asfortranarray),
    ((200, 40), None, lambda a: np.concatenate([a, a], axis=1)[:, 1::2]),
    ((200, 6, 5), None, lambda a: a.transpose(0, 2, 1).copy().transpose(0, 2, 1)),
])
def test_strided_nchw_feature_and_3d_arrays_are_read_through_their_strides(tmp_path, shape,
                                                                          layout, make):
    base = np.random.default_rng(3).integers(0, 256, shape).astype(np.uint8)
    images = make(base)
    labels = np.zeros(shape[0], np.uint8)
    for name, a in (("strided", images), ("copy", np.ascontiguousarray(images))):
        sluice.write_dataset(str(tmp_path / name), "train", a, labels, layout=layout,
                             records_per_frame=32)
    assert _files(tmp_path / "strided") == _files(tmp_path / "copy")
    stored = sluice.Dataset(str(tmp_path / "strided"))[:][0]
    expected = images.transpose(0, 2, 3, 1) if layout == "NCHW" else images
    np.testing.assert_array_equal(stored.reshape(expected.shape), expected)


def test_a_memmap_is_written_as_its_contents(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, (500, 8, 8), dtype=np.uint8)
    path = tmp_path / "images.u8"
    data.tofile(path)
    mapped = np.memmap(path, dtype=np.uint8, mode="r", shape=(500, 8, 8))
    sluice.write_dataset(str(tmp_path / "ds"), "train", mapped, np.zeros(500, np.uint8))
    np.testing.assert_array_equal(sluice.Dataset(str(tmp_path / "ds"))[:][0], data)


def test_an_object_or_byte_swapped_array_is_a_value_error_naming_its_dtype(tmp_path):
    with pytest.raises(ValueError, match="images: dtype must be uint8 or float32, got object"):
        sluice.write_dataset(str(tmp_path), "train", np.empty((4, 2, 2), dtype=object),
                             np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="images: dtype must be uint8 or float32, got >f4"):
        sluice.write_dataset(str(tmp_path), "train", np.zeros((4, 2, 2), dtype=">f4"),
                             np.zeros(4, np.uint8))
    assert not os.path.exists(tmp_path / "train.manifest.json")


MEMORY_SCRIPT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import sluice
    out, count = sys.argv[1], int(sys.argv[2])
    record = (np.arange(1 << 20, dtype=np.uint32) % 251).astype(np.uint8).reshape(1024, 1024)
    images = np.broadcast_to(record, (count, 1024, 1024))  # count MiB, one MiB of memory
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sluice.write_dataset(out, "train", images, np.zeros(count, np.uint8),
                         records_per_frame=16, zstd_level=1, threads=2)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    first, label = sluice.Dataset(out)[count - 1]
    assert label == 0 and (first.reshape(1024, 1024) == record).all()
    print("grown_kib", grown)
""")


def test_a_broadcast_array_of_2_gib_is_written_in_bounded_memory(tmp_path):
    count = 2048  # 2 GiB of samples; the write may hold a window of 16 MiB frames, not them
    r = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(tmp_path / "ds"), str(count)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    grown_mib = int(r.stdout.split("grown_kib")[1]) / 1024
    assert grown_mib < 256, "peak resident memory grew by %.0f MiB writing a 2 GiB array" % (
        grown_mib)


# write_dataset(out="") wrote the split into the current directory; a file as `out` was a
# ValueError ("exists and is not a directory").
def test_write_dataset_refuses_an_empty_out_and_a_file_as_its_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    images, labels = np.zeros((4, 2, 2), np.uint8), np.zeros(4, np.uint8)
    with pytest.raises(ValueError, match="^out: the path is empty"):
        sluice.write_dataset("", "train", images, labels)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="^out: 'file' is not a directory"):
        sluice.write_dataset("file", "train", images, labels)
    with pytest.raises(NotADirectoryError, match="^out: 'file', the nearest existing parent "
                                                 "of 'file/a/b', is not a directory"):
        sluice.write_dataset("file/a/b", "train", images, labels)
    assert os.listdir(tmp_path) == ["file"]
    sluice.write_dataset(tmp_path / "new" / "ds", "train", images, labels)  # parents created
    assert "train.manifest.json" in os.listdir(tmp_path / "new" / "ds")
