"""sluice.Loader's work ahead (docs/python.md, "Work ahead"): the next epoch's pipeline starts
once this one's batches are all built. The batches must be the ones a loader without it
delivers, whatever the caller does between passes, and the report must stay true."""
import io
import itertools
import time

import numpy as np
import pytest
import torch

import sluice
import sluice.transforms as T

PIL = pytest.importorskip("PIL.Image")


def _batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def _same(a, b):
    assert len(a) == len(b)
    for (x, y), (ex, ey) in zip(a, b):
        assert torch.equal(x, ex) and torch.equal(y, ey)


@pytest.fixture
def photos(tmp_path):
    rng = np.random.default_rng(5)
    data = []
    for i in range(48):
        a = rng.integers(0, 256, (40 + i % 7, 36 + i % 5, 3), dtype=np.uint8)
        buf = io.BytesIO()
        PIL.fromarray(a).save(buf, format="JPEG", quality=90)
        data.append(buf.getvalue())
    sluice.write_dataset(tmp_path, "train", data, (np.arange(48) % 4).astype(np.uint8),
                         records_per_frame=8)
    return str(tmp_path)


def _photo_loader(path, work_ahead):
    return sluice.Loader(path, batch_size=8, shuffle=True, seed=3, work_ahead=work_ahead,
                         transforms=[T.DecodeImage(), T.RandomResizedCrop(16),
                                     T.RandomHorizontalFlip()])


def test_epochs_worked_ahead_are_the_batches_of_a_loader_without_it(photos):
    ahead, plain = _photo_loader(photos, True), _photo_loader(photos, False)
    for epoch in range(3):
        got = _batches(ahead)
        # The epoch's last batch was built before it was delivered: the next epoch's run is
        # started by then, and only on the loader that works ahead.
        assert ahead._core.ahead_epoch() == epoch + 1
        assert plain._core.ahead_epoch() is None
        _same(got, _batches(plain))
    assert ahead._core.ahead_epoch() == 3


def test_set_epoch_and_load_state_dict_are_obeyed_over_a_run_ahead(fashion):
    path = fashion["dir"] + "/test.manifest.json"

    def make(work_ahead):
        return sluice.Loader(path, batch_size=500, shuffle=True, seed=9, work_ahead=work_ahead)

    reference = make(False)
    epochs = {}
    for e in (0, 1, 5, 6):
        reference.set_epoch(e)
        epochs[e] = _batches(reference)
    loader = make(True)
    _same(_batches(loader), epochs[0])
    assert loader._core.ahead_epoch() == 1
    loader.set_epoch(5)  # the run ahead for epoch 1 is dropped, epoch 5 delivered
    _same(_batches(loader), epochs[5])
    assert loader._core.ahead_epoch() == 6
    state = loader.state_dict()
    assert (state["epoch"], state["step"]) == (6, 0)
    state.update(epoch=1, step=7)
    loader.load_state_dict(state)  # mid-epoch: a run of its own, from step 7
    _same(_batches(loader), epochs[1][7:])
    reference.set_epoch(2)
    _same(_batches(loader), _batches(reference))


def test_a_pass_left_mid_epoch_continues_and_keeps_the_run_ahead_for_the_epoch_after(fashion):
    path = fashion["dir"] + "/test.manifest.json"
    loader = sluice.Loader(path, batch_size=500, shuffle=True, seed=4)
    reference = sluice.Loader(path, batch_size=500, shuffle=True, seed=4, work_ahead=False)
    epoch0, epoch1 = _batches(reference), _batches(reference)
    got = []
    for x, y in loader:  # 20 steps; a slow step lets the pipeline build them all
        got.append((x.clone(), y.clone()))
        time.sleep(0.02)
        if loader._core.ahead_epoch() == 1:
            break
    assert 1 <= len(got) < 20, "the run ahead started only at the epoch's last batch"
    assert loader._core.ahead_epoch() == 1
    got += _batches(loader)  # the rest of epoch 0, from its own run
    _same(got, epoch0)
    assert loader._core.ahead_epoch() == 1  # kept: it is the epoch after
    _same(_batches(loader), epoch1)


def test_an_epoch_ended_without_stop_iteration_takes_the_run_ahead(fashion):
    path = fashion["dir"] + "/test.manifest.json"
    loader = sluice.Loader(path, batch_size=1000, shuffle=True, seed=2)
    reference = sluice.Loader(path, batch_size=1000, shuffle=True, seed=2, work_ahead=False)
    for _ in range(3):
        expected = _batches(reference)
        got = [(x.clone(), y.clone()) for _, (x, y) in zip(range(len(loader)), loader)]
        _same(got, expected)


def test_the_report_of_a_pass_worked_ahead_stays_true(photos):
    loader = _photo_loader(photos, True)
    for _ in range(3):
        start = time.perf_counter()
        samples = sum(len(y) for _, y in loader)
        seconds = time.perf_counter() - start
        report = loader.report()
        assert report["samples"] == samples == 48
        # The rate is the pass's samples over its own span: within the wall clock around it.
        assert report["measured_samples_per_s"] >= samples / seconds * 0.999
        for stage in report["stages"]:
            for key in ("busy_pct", "outside_span_pct", "wait_input_pct", "wait_output_pct"):
                value = stage.get(key)
                assert value is None or 0.0 <= value <= 100.0, (stage["stage"], key, value)
        time.sleep(0.05)  # between passes: the run ahead works outside any span


def test_work_ahead_must_be_a_bool(fashion):
    with pytest.raises(TypeError, match="work_ahead"):
        sluice.Loader(fashion["dir"], batch_size=10, work_ahead="no")


@pytest.mark.parametrize("work_ahead", [True, False])
def test_set_epoch_or_load_state_dict_mid_pass_holds_after_that_pass_ends(fashion, work_ahead):
    path = fashion["dir"] + "/test.manifest.json"

    def make():
        return sluice.Loader(path, batch_size=1000, shuffle=True, seed=8, work_ahead=work_ahead)

    reference = make()
    reference.set_epoch(7)
    epoch7 = _batches(reference)
    reference.set_epoch(5)
    epoch5 = _batches(reference)
    loader = make()
    it = iter(loader)
    next(it)
    loader.set_epoch(7)
    assert sum(1 for _ in it) == len(loader) - 1  # the old pass runs to its end
    assert (loader.state_dict()["epoch"], loader.state_dict()["step"]) == (7, 0)
    _same(_batches(loader), epoch7)
    state = loader.state_dict()
    state.update(epoch=5, step=3)
    it = iter(loader)
    next(it)
    loader.load_state_dict(state)
    list(it)
    _same(_batches(loader), epoch5[3:])
