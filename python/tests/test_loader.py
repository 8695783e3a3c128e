"""sluice.Loader against torchvision and DataLoader, the zero-copy contract, state and report."""
import queue
import re
import threading
import time
import _thread

import numpy as np
import pytest
import torch

import sluice


def reference_batches(images, labels, batch_size):
    """ToTensor values (x/255 as float32) and int64 labels, unshuffled."""
    x = torch.from_numpy(images.copy()).to(torch.float32).div(255).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(y), batch_size)]


def assert_bitwise(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    if a.dtype in (torch.float32, torch.float16):
        view = torch.int32 if a.dtype == torch.float32 else torch.int16
        assert torch.equal(a.contiguous().view(view), b.contiguous().view(view))
    else:
        assert torch.equal(a, b)


def test_equals_torchvision_fashion_mnist_to_tensor_bitwise(fashion):
    from torchvision import datasets, transforms
    tv = datasets.FashionMNIST(fashion["torch_root"], train=True, download=False,
                               transform=transforms.ToTensor())
    expected = torch.utils.data.DataLoader(tv, batch_size=500, shuffle=False)
    loader = sluice.Loader(fashion["dir"], batch_size=500, shuffle=False)
    n = 0
    for (x, y), (ex, ey) in zip(loader, expected):
        assert x.shape == (500, 1, 28, 28) and y.dtype == torch.int64
        assert_bitwise(x, ex)
        assert torch.equal(y, ey)
        n += len(y)
    assert n == 60000


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_normalize_and_half_match_torchvision_transforms(fashion, device):
    from torchvision import transforms
    images, labels = fashion["test"]
    ref = reference_batches(images, labels, 1000)
    norm = transforms.Normalize((0.2860,), (0.3530,))
    cases = [(torch.float32, None, lambda x: x), (torch.float16, None, lambda x: x.half()),
             (torch.float32, (0.2860, 0.3530), norm),
             (torch.uint8, None, lambda x: (x * 255).round().to(torch.uint8))]
    for dtype, normalize, transform in cases:
        loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=1000,
                               shuffle=False, dtype=dtype, normalize=normalize, device=device)
        n = 0
        for (x, y), (ex, ey) in zip(loader, ref):
            assert_bitwise(x, transform(ex))
            assert torch.equal(y, ey)
            n += 1
        assert n == len(ref) == len(loader)


def train_seed_model(batches_per_epoch, test_x, test_y, epochs=10):
    """The seed script: 784-128-10, SGD lr 0.01, cross entropy; returns test accuracy."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(epochs):
        for x, y in batches_per_epoch(epoch):
            loss = loss_fn(model(x.view(-1, 784)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return (model(test_x).argmax(1) == test_y).float().mean().item()


def test_seed_training_loop_reaches_the_same_accuracy_as_pytorch(fashion):
    # The PyTorch side is the seed script with its data preloaded as tensors (the values
    # ToTensor gives, bitwise: the test above), so the test runs in about a minute.
    torch.set_num_threads(1)
    images, labels = fashion["train"]
    ref = reference_batches(images, labels, 32)
    test_images, test_labels = fashion["test"]
    test_x = torch.from_numpy(test_images.copy()).reshape(-1, 784).float().div(255)
    test_y = torch.from_numpy(test_labels.astype(np.int64))
    acc_torch = train_seed_model(lambda e: ref, test_x, test_y)
    loader = sluice.Loader(fashion["dir"], batch_size=32, shuffle=False, threads=1)
    acc_sluice = train_seed_model(lambda e: loader, test_x, test_y)
    assert abs(acc_sluice - acc_torch) <= 0.005, (acc_sluice, acc_torch)
    assert acc_sluice > 0.8


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_keeping_1000_batches_keeps_them_intact(fashion, device):
    images, labels = fashion["test"]
    ref = reference_batches(images, labels, 8)
    # 8 buffers (8 device slots on sim): the caller keeps far more batches than the pool.
    # Device batches need device_zero_copy=False to be kept (the next test).
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=8, shuffle=False,
                           pool_size=8, device_ring_depth=8, device=device,
                           device_zero_copy=device == "cpu")
    kept = []
    for x, y in loader:
        kept.append((x, y))
        if len(kept) == 1000:
            break
    for (x, y), (ex, ey) in zip(kept, ref):
        assert_bitwise(x, ex)
        assert torch.equal(y, ey)
    # Host: the first half of the pool went out zero-copy and is still held; the pipeline
    # kept running on the other half. Device: every batch was copied.
    assert loader._pass.zero_copy_live() == (4 if device == "cpu" else 0)
    del kept, x, y
    assert loader._pass.zero_copy_live() == 0


def test_keeping_zero_copy_device_batches_past_the_ring_raises_instead_of_hanging(fashion):
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=8, shuffle=False,
                           device="sim", device_ring_depth=4)
    it = iter(loader)
    kept = [next(it) for _ in range(4)]
    with pytest.raises(ValueError, match="device_zero_copy=False"):
        next(it)
    del kept[0]  # freeing the oldest batch lets the ring move on
    x, y = next(it)
    assert x.shape == (8, 1, 28, 28)
    # A new iteration continues where this one stopped (after 5 batches) ...
    assert sum(1 for _ in loader) == len(loader) - 5
    # ... and a training loop, which frees each batch before the next, is zero copy throughout.
    loader.set_epoch(1)
    assert sum(1 for _ in loader) == len(loader)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_tensors_deleted_on_other_threads(fashion, device):
    images, labels = fashion["test"]
    ref = reference_batches(images, labels, 16)
    q = queue.Queue(maxsize=4)
    errors = []

    def consumer():
        while True:
            item = q.get()
            if item is None:
                return
            i, x, y = item
            try:
                assert_bitwise(x, ref[i][0])
                assert torch.equal(y, ref[i][1])
            except AssertionError as e:  # pragma: no cover - reported below
                errors.append((i, e))
            del x, y, item  # the last reference dies here: the deleter runs on this thread

    # Device batches are a ring: a kept batch blocks the slot `depth` batches later, so what
    # matters is the span of ids alive, not their count. One worker checks them in order
    # (span <= 4 queued + 1 checked + 1 here < 16 slots); host batches take three.
    workers = [threading.Thread(target=consumer) for _ in range(3 if device == "cpu" else 1)]
    for w in workers:
        w.start()
    for epoch in range(2):
        loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=16,
                               shuffle=False, pool_size=6, device_ring_depth=16, device=device)
        for i, (x, y) in enumerate(loader):
            q.put((i, x, y))
            del x, y
    for _ in workers:
        q.put(None)
    for w in workers:
        w.join()
    assert not errors, errors[:3]


def test_state_dict_resume_mid_epoch_gives_the_identical_continuation(fashion):
    path = fashion["dir"] + "/test.manifest.json"

    def make():
        return sluice.Loader(path, batch_size=64, shuffle=True, seed=7)

    full = make()
    expected = []
    for epoch in range(2):
        expected += [(x.clone(), y.clone()) for x, y in full]
    steps = len(full)
    first = make()
    got = []
    for x, y in first:  # epoch 0 in full
        got.append((x.clone(), y.clone()))
    for i, (x, y) in enumerate(first):  # epoch 1, stopped mid-way
        got.append((x.clone(), y.clone()))
        if i == 40:
            break
    state = first.state_dict()
    dataset = state.pop("dataset")
    assert state == {"order": {"batch_size": 64, "seed": 7, "shuffle": True, "window": 64,
                               "drop_last": False, "transforms": ""}, "epoch": 1, "step": 41}
    assert dataset["records"] == 10000 and len(dataset["manifest_xxh3"]) == 16
    state["dataset"] = dataset
    resumed = make()
    resumed.load_state_dict(state)
    for x, y in resumed:
        got.append((x.clone(), y.clone()))
    assert len(got) == len(expected) == 2 * steps
    for (x, y), (ex, ey) in zip(got, expected):
        assert_bitwise(x, ex)
        assert torch.equal(y, ey)
    # Epochs differ (a new shuffle per epoch); set_epoch goes back to one.
    assert not torch.equal(expected[0][1], expected[steps][1])
    resumed.set_epoch(0)
    x0, y0 = next(iter(resumed))
    assert torch.equal(y0, expected[0][1])


def test_load_state_dict_rejects_another_order(fashion):
    loader = sluice.Loader(fashion["dir"], batch_size=32, seed=1)
    state = loader.state_dict()
    state["order"]["seed"] = 2
    with pytest.raises(ValueError, match="order.seed"):
        loader.load_state_dict(state)


def test_len_counts_the_batches_of_an_epoch(fashion):
    path = fashion["dir"] + "/test.manifest.json"
    for drop_last, expected in ((False, 157), (True, 156)):  # 10,000 / 64
        loader = sluice.Loader(path, batch_size=64, drop_last=drop_last)
        assert len(loader) == expected
        assert sum(1 for _ in loader) == expected


def test_data_parallel_ranks_split_every_global_batch(fashion):
    path = fashion["dir"] + "/test.manifest.json"
    whole = [y for _, y in sluice.Loader(path, batch_size=100, shuffle=True, seed=3)]
    parts = [[y for _, y in sluice.Loader(path, batch_size=100, shuffle=True, seed=3,
                                          rank=r, world_size=2)] for r in range(2)]
    assert len(parts[0]) == len(parts[1]) == len(whole)
    for g, a, b in zip(whole, *parts):
        assert len(a) + len(b) == len(g)
        assert sorted((a.tolist() + b.tolist())) == sorted(g.tolist())


def test_corrupt_shard_raises_data_loss_naming_the_file(corrupt_copy):
    path, shard = corrupt_copy
    loader = sluice.Loader(path + "/test.manifest.json", batch_size=100, shuffle=False)
    with pytest.raises(sluice.DataLossError) as e:
        for _ in loader:
            pass
    assert isinstance(e.value, OSError)
    assert shard in str(e.value) and "frame" in str(e.value)
    with pytest.raises(sluice.DataLossError, match=re.escape(shard)):
        sluice.Dataset(path, "test").verify()


def test_corrupt_shard_skipped_with_a_count(corrupt_copy):
    path, shard = corrupt_copy
    # One frame of 256 records in 10,000: 2.6 %, above the default max_corrupt_fraction.
    loader = sluice.Loader(path + "/test.manifest.json", batch_size=100, shuffle=False,
                           on_corrupt="skip", max_corrupt_fraction=0.05)
    n = sum(len(y) for _, y in loader)
    skipped = loader.skipped()
    assert skipped["frames"] == 1
    assert skipped["records"] > 0 and n == 10000 - skipped["records"]
    assert shard in skipped["messages"][0]


def test_bad_arguments_raise_with_clear_messages(fashion, tmp_path):
    path = fashion["dir"]
    with pytest.raises(ValueError, match="batch_size"):
        sluice.Loader(path, batch_size=0)
    with pytest.raises(ValueError, match="dtype"):
        sluice.Loader(path, batch_size=8, dtype=torch.int32)
    with pytest.raises(ValueError, match="device"):
        sluice.Loader(path, batch_size=8, device="tpu")
    with pytest.raises(ValueError, match="on_corrupt"):
        sluice.Loader(path, batch_size=8, on_corrupt="ignore")
    with pytest.raises(ValueError, match="rank"):
        sluice.Loader(path, batch_size=8, rank=2, world_size=2)
    with pytest.raises(ValueError, match="std"):
        sluice.Loader(path, batch_size=8, normalize=(0.5, 0.0))
    missing = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        sluice.Loader(missing, batch_size=8)
    with pytest.raises(ValueError, match="dtype"):
        sluice.write_dataset(tmp_path / "w", "train", np.zeros((4, 2, 2), np.int16),
                             np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="labels"):
        sluice.write_dataset(tmp_path / "w", "train", np.zeros((4, 2, 2), np.uint8),
                             np.zeros(3, np.uint8))
    with pytest.raises(ValueError, match="report"):
        sluice.Loader(path, batch_size=8).report()


def test_report_has_the_schema_keys_and_the_python_consumer_as_compute(fashion):
    import json
    import os
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100)
    steps = sum(1 for _ in loader)
    report = loader.report()
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                            "report-schema.md")).read()
    # A single process's fields: the tables before the data-parallel section.
    doc = doc.split("## Data-parallel runs")[0]
    fields = re.findall(r"^\| `([a-z_\[\].]+)` \|", doc, re.M)
    top = [f for f in fields if "." not in f and "[" not in f]
    assert list(report.keys()) == top
    stage_fields = [f[len("stages[]."):] for f in fields if f.startswith("stages[].")]
    assert [row["stage"] for row in report["stages"]] == sluice._sluice._report_stage_names()
    assert report["stages"][0]["stage"] == "read" and report["stages"][-1]["stage"] == "compute"
    for row in report["stages"]:
        assert set(stage_fields) <= set(row.keys())
    assert report["schema"] == "sluice.bottleneck_report/1"
    assert report["device"].startswith("python consumer")
    compute = report["stages"][-1]
    assert compute["items"] == steps and compute["samples"] == 10000
    assert report["verdict"]["class"] in ("input-bound", "partly-input-bound", "compute-bound",
                                          "cpu-bound")
    text = loader.report_text()
    assert "compute" in text and report["verdict"]["sentence"] in text
    json.dumps(report)


def test_report_html_marks_the_stage_the_report_names(fashion, tmp_path):
    import html
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100)
    for _ in range(2):  # two passes: two bars in the epoch chart
        for x, y in loader:
            time.sleep(0.002)  # a step: the timeline has compute in it
    report = loader.report()
    path = loader.report_html(tmp_path / "report.html")
    page = open(path).read()
    marked = re.findall(r'data-stage="([a-z_]+)" data-limit="true"', page)
    assert marked == [report["verdict"]["limiting_stage"]]
    assert html.escape(report["verdict"]["sentence"], quote=True).replace("&#x27;", "&#39;") in page
    assert page.count("<rect") > 2  # the epoch bars and the timeline's buckets
    assert '<svg id="epochs"' in page and '<svg id="timeline"' in page
    assert not re.search(r"https?://", page) and "<script" not in page


def test_ctrl_c_during_iteration_stops_cleanly(fashion):
    loader = sluice.Loader(fashion["dir"], batch_size=16, shuffle=False)
    stopped = threading.Event()

    def interrupt_until_stopped():
        # Repeated: CPython drops a KeyboardInterrupt raised inside a finalizer that the
        # garbage collector happens to run at that moment ("Exception ignored in ...").
        while not stopped.wait(0.2):
            _thread.interrupt_main()

    interrupter = threading.Thread(target=interrupt_until_stopped)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            while True:
                for x, y in loader:
                    pass
    finally:
        stopped.set()
        while interrupter.is_alive():  # an interrupt sent just before stopped.set() lands here
            try:
                interrupter.join()
            except KeyboardInterrupt:
                pass
        try:
            time.sleep(0.01)  # lets a last pending interrupt fire here, not in a later test
        except KeyboardInterrupt:
            pass
    # The loader is usable after the interrupt.
    loader.set_epoch(0)
    x, y = next(iter(loader))
    assert x.shape == (16, 1, 28, 28)


def test_cuda_batches_are_ordered_with_the_current_stream(fashion):
    count = sluice._sluice.cuda_device_count()
    if count == 0 or not torch.cuda.is_available():
        why = sluice._sluice.cuda_device_status(0) or "torch.cuda.is_available() is False"
        pytest.skip(why if why.startswith("no CUDA device") else "no CUDA device: " + why)
    images, labels = fashion["test"]
    ref = reference_batches(images, labels, 100)
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100,
                           shuffle=False, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        got = [(x * 1, y * 1) for x, y in loader]
    stream.synchronize()
    for (x, y), (ex, ey) in zip(got, ref):
        assert x.device.type == "cuda"
        assert_bitwise(x.cpu(), ex)
        assert torch.equal(y.cpu(), ey)


def test_dataset_random_access_and_verify(fashion):
    images, labels = fashion["test"]
    ds = sluice.Dataset(fashion["dir"], "test")
    assert len(ds) == 10000 and ds.shape == (28, 28, 1) and ds.dtype == "u8"
    for i in (0, 1, 255, 256, 9999, -1):
        x, y = ds[i]
        assert x.dtype == np.uint8 and x.shape == (28, 28)
        assert np.array_equal(x, images[i]) and y == int(labels[i])
    with pytest.raises(IndexError):
        ds[10000]
    ds.verify()


def test_write_dataset_round_trips_float_samples_and_int_labels(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.random((300, 5, 3, 2), dtype=np.float32)
    labels = rng.integers(0, 1000, 300)
    info = sluice.write_dataset(tmp_path, "train", images, labels, records_per_frame=64)
    assert info == {"split": "train", "records": 300, "shards": 1,
                    "num_classes": int(labels.max()) + 1}
    ds = sluice.Dataset(str(tmp_path))
    assert ds.shape == (5, 3, 2) and ds.dtype == "f32"
    for i in range(300):
        x, y = ds[i]
        assert np.array_equal(x, images[i]) and y == labels[i]
    ds.verify()



def test_rank_and_world_size_default_from_torch_distributed(fashion, monkeypatch):
    path = fashion["dir"] + "/test.manifest.json"
    explicit = [y for _, y in sluice.Loader(path, batch_size=100, shuffle=True, seed=5, rank=1,
                                            world_size=3)]
    dist = torch.distributed
    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", lambda: 1)
    monkeypatch.setattr(dist, "get_world_size", lambda: 3)
    loader = sluice.Loader(path, batch_size=100, shuffle=True, seed=5)
    assert (loader.rank, loader.world_size) == (1, 3)
    defaulted = [y for _, y in loader]
    assert len(defaulted) == len(explicit) == 100
    for a, b in zip(defaulted, explicit):
        assert torch.equal(a, b)
    # An explicit argument wins over torch.distributed.
    assert sluice.Loader(path, batch_size=100, rank=0, world_size=1).world_size == 1
