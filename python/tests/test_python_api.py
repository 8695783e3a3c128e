"""The Python API agrees with sluice-train and DataLoader: defaults, split=, Dataset slicing,
and DataLoader's arguments refused with their sluice equivalent (docs/python.md)."""
import inspect
import os
import re

import numpy as np
import pytest
import torch

import sluice

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "python.md")


def test_loader_does_not_shuffle_by_default_as_sluice_train(fashion):
    _, labels = fashion["test"]
    loader = sluice.Loader(fashion["dir"], batch_size=1000, split="test")
    got = torch.cat([y for _, y in loader])
    assert torch.equal(got, torch.from_numpy(labels.astype(np.int64)))
    assert loader.state_dict()["order"]["shuffle"] is False
    assert inspect.signature(sluice.Loader).parameters["shuffle"].default is False


def test_threads_zero_means_all_cores_as_sluice_train(fashion):
    path = fashion["dir"] + "/test.manifest.json"
    one = [y for _, y in sluice.Loader(path, batch_size=500, threads=1)]
    zero = sluice.Loader(path, batch_size=500, threads=0, decompress_threads=0,
                         preprocess_threads=0)
    got = [y for _, y in zero]
    assert len(got) == len(one) == 20
    assert all(torch.equal(a, b) for a, b in zip(got, one))
    with pytest.raises(ValueError, match=r"threads: must be an int or None >= 0 \(None or 0: "
                                         r"all usable cores\), got -1"):
        sluice.Loader(path, batch_size=10, threads=-1)


def test_split_chooses_the_split_of_a_directory(fashion):
    assert len(sluice.Loader(fashion["dir"], batch_size=100, split="test")) == 100
    assert len(sluice.Loader(fashion["dir"], batch_size=100)) == 600  # train by default
    ds = sluice.Dataset(fashion["dir"], split="test")
    assert ds.split == "test" and len(ds) == 10000
    assert sluice.Dataset(fashion["dir"]).split == "train"
    manifest = fashion["dir"] + "/test.manifest.json"
    assert len(sluice.Loader(manifest, batch_size=100, split="test")) == 100


def test_unknown_split_is_a_value_error_listing_the_splits(fashion):
    message = r"has no split \"val\"; its splits: test, train"
    with pytest.raises(ValueError, match=message):
        sluice.Loader(fashion["dir"], batch_size=10, split="val")
    with pytest.raises(ValueError, match=message):
        sluice.Dataset(fashion["dir"], split="val")
    with pytest.raises(TypeError, match=r"split: expected a str or None, got 3 \(int\)"):
        sluice.Loader(fashion["dir"], batch_size=10, split=3)


def test_explicit_split_is_never_replaced_by_the_only_split(tmp_path):
    sluice.write_dataset(tmp_path, "train", np.zeros((10, 2, 2), np.uint8), np.zeros(10, np.uint8))
    assert sluice.Dataset(str(tmp_path)).split == "train"  # no split=: the only one
    with pytest.raises(ValueError, match=r"has no split \"test\"; its splits: train"):
        sluice.Dataset(str(tmp_path), "test")


def test_manifest_of_another_split_is_refused(fashion):
    manifest = fashion["dir"] + "/train.manifest.json"
    message = r"train.manifest.json is the manifest of split \"train\", not \"test\""
    with pytest.raises(ValueError, match=message):
        sluice.Loader(manifest, batch_size=10, split="test")
    with pytest.raises(ValueError, match=message):
        sluice.Dataset(manifest, split="test")


def _stacked(ds, indices):
    records = [ds[i] for i in indices]
    return (np.stack([x for x, _ in records]), np.array([y for _, y in records], np.int64))


@pytest.mark.parametrize("key", [slice(0, 4), slice(None, None, 2), slice(-3, None),
                                 slice(5, 1, -2), slice(250, 260), slice(None, None, -997),
                                 slice(3, 3), slice(9990, 20000)])
def test_dataset_slice_stacks_the_records_it_selects(fashion, key):
    ds = sluice.Dataset(fashion["dir"], "test")
    images, labels = fashion["test"]
    x, y = ds[key]
    indices = range(len(ds))[key]
    assert x.shape == (len(indices), 28, 28) and x.dtype == np.uint8
    assert y.shape == (len(indices),) and y.dtype == np.int64
    assert np.array_equal(x, images[key]) and np.array_equal(y, labels[key].astype(np.int64))
    ex, ey = _stacked(ds, indices) if len(indices) else (x, y)
    assert np.array_equal(x, ex) and np.array_equal(y, ey)


def test_dataset_slice_of_channels_keeps_the_record_shape(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.random((40, 4, 3, 2), dtype=np.float32)
    labels = rng.integers(0, 10, 40)
    sluice.write_dataset(tmp_path, "train", images, labels, records_per_frame=8,
                         layout="NHWC")
    ds = sluice.Dataset(str(tmp_path))
    x, y = ds[3:30:4]
    assert x.shape == (7,) + ds[0][0].shape == (7, 4, 3, 2) and x.dtype == np.float32
    assert np.array_equal(x, images[3:30:4]) and np.array_equal(y, labels[3:30:4])
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        ds[::0]


def test_dataset_negative_index_counts_from_the_end_and_out_of_range_names_the_range(fashion):
    ds = sluice.Dataset(fashion["dir"], "test")
    images, labels = fashion["test"]
    assert np.array_equal(ds[-1][0], images[-1]) and ds[-1][1] == labels[-1]
    assert np.array_equal(ds[-10000][0], images[0])
    assert ds[np.int64(-2)][1] == labels[-2]
    for index in (-10001, 10000, 2**70):
        with pytest.raises(IndexError, match=r"record index %d out of range for .*test.manifest"
                                             r".json \(10000 records: expected -10000 to 9999\)"
                                             % index):
            ds[index]
    for key in ("0", 1.5, None):
        with pytest.raises(TypeError, match=r"sluice.Dataset indices must be an int or a slice"):
            ds[key]


def _dataloader_arguments():
    return [p for p in inspect.signature(torch.utils.data.DataLoader).parameters if p != "self"]


def test_every_dataloader_argument_is_a_loader_argument_or_mapped():
    loader_arguments = set(inspect.signature(sluice.Loader).parameters)
    for name in _dataloader_arguments():
        assert name in loader_arguments or name in sluice._FROM_DATALOADER, name


@pytest.mark.parametrize("name, value, equivalent", [
    ("num_workers", 4, "threads=N"), ("pin_memory", True, "device='cuda'"),
    ("pin_memory_device", "cuda", "device='cuda:N'"), ("collate_fn", list, "already stacked"),
    ("sampler", None, "rank/world_size"), ("batch_sampler", None, "batch_size"),
    ("timeout", 5, "on_corrupt"), ("worker_init_fn", print, "seed"),
    ("multiprocessing_context", "spawn", "Fork"), ("generator", None, "seed=N"),
    ("prefetch_factor", 2, "read_ahead_frames"), ("persistent_workers", True, "keeps"),
    ("dataset", None, "path"), ("transform", None, "transforms=[...]"),
    ("target_transform", None, "int64"),
])
def test_dataloader_argument_names_its_sluice_equivalent(fashion, name, value, equivalent):
    with pytest.raises(TypeError) as error:
        sluice.Loader(fashion["dir"], batch_size=10, **{name: value})
    message = str(error.value)
    assert message.startswith("sluice.Loader: %s is DataLoader's: " % name)
    assert equivalent in message and '(docs/python.md, "From DataLoader")' in message


def test_unknown_argument_lists_the_loader_arguments(fashion):
    with pytest.raises(TypeError, match=r"sluice.Loader: unexpected argument 'batchsize'; its "
                                        r"arguments: path, batch_size, shuffle, seed, .*split"):
        sluice.Loader(fashion["dir"], batch_size=10, batchsize=10)


def test_docs_table_maps_every_dataloader_argument():
    text = open(DOCS).read()
    section = text[text.index("### From DataLoader"):]
    section = section[:section.index("\n#", 1)]
    rows = [line for line in section.splitlines() if line.startswith(("| `", "| Dataset `"))]
    documented = set()
    for row in rows:
        documented.update(re.findall(r"`([a-z_]+)`", row.split("|")[1]))
    expected = set(_dataloader_arguments()) | {"transform", "target_transform"}
    assert expected <= documented, expected - documented


def test_host_labels_leave_cpp_as_int64_of_their_own(fashion):
    # The per-batch cost (docs/benchmarks.md, 2026-12-02): no torch .to(int64) per batch, and
    # labels kept alone hold no pipeline buffer.
    _, labels = fashion["test"]
    loader = sluice.Loader(fashion["dir"], batch_size=100, split="test", pool_size=4)
    batches = iter(loader)
    _, first = next(batches)
    capsule = loader._pass.next(0)[1]
    raw = torch.utils.dlpack.from_dlpack(capsule)
    assert raw.dtype == torch.int64 and torch.equal(raw, torch.from_numpy(
        labels[100:200].astype(np.int64)))
    kept = [first, raw] + [y for _, y in batches]  # more than the pool: none of them blocks
    assert torch.equal(torch.cat(kept), torch.from_numpy(labels.astype(np.int64)))
