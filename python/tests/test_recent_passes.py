"""The Loader's recent passes beside its latest one (docs/bottleneck.md, "Short passes"): a
report rests on one pass, and identical short passes priced the same advice from 1.59x to
2.90x; the summary gives how often each verdict and advice entry came and their spread."""
import numpy as np
import pytest

import sluice
from sluice.recent_passes import RecentPasses, annotate_advice, headline_text, summary_text


class _FakeRecord:
    def __init__(self, rate, verdict, stage, prices):
        self.calls = 0
        self._report = {
            "measured_samples_per_s": rate,
            "verdict": {"class": verdict, "limiting_stage": stage,
                        "advice": [{"setting": "image-side", "value": "0.5",
                                    "text": "store the images at 0.5 of their side",
                                    "predicted_speedup": p} for p in prices]}}

    def report_json(self):
        self.calls += 1
        return self._report


def test_the_summary_leaves_the_first_pass_out_and_gives_counts_and_spreads():
    recent = RecentPasses()
    recent.add(0, _FakeRecord(900.0, "cpu-bound", "decode", [9.0]))  # cold: left out
    assert recent.summary() is None
    for epoch, (rate, verdict, stage, prices) in enumerate([
            (3000.0, "cpu-bound", "decode", [2.0]), (4000.0, "compute-bound", "compute", []),
            (3500.0, "cpu-bound", "decode", [2.5]), (2800.0, "cpu-bound", "decode", [1.6])], 1):
        recent.add(epoch, _FakeRecord(rate, verdict, stage, prices))
    s = recent.summary()
    assert s["passes"] == 4 and s["epochs"] == [1, 2, 3, 4]
    assert s["measured_samples_per_s"] == {"median": 3250.0, "min": 2800.0, "max": 4000.0}
    assert s["verdicts"] == [{"class": "cpu-bound", "limiting_stage": "decode", "passes": 3},
                             {"class": "compute-bound", "limiting_stage": "compute", "passes": 1}]
    (a,) = s["advice"]
    assert (a["setting"], a["value"], a["passes"]) == ("image-side", "0.5", 3)
    assert (a["predicted_speedup_min"], a["predicted_speedup_median"],
            a["predicted_speedup_max"]) == (1.6, 2.0, 2.5)
    text = summary_text(s)
    assert "the last 4 finished (epochs 1-4" in text
    assert "measured 2.8-4.0 k samples/s, median 3.2 k" in text
    assert "cpu-bound (decode) in 3, compute-bound (compute) in 1" in text
    assert "in 3 of 4, priced 1.60x-2.50x, median 2.00x" in text
    # The headline report_text() starts with, and the latest pass's entry annotated.
    head = headline_text(s)
    assert head.startswith("over the last 4 passes: cpu-bound (decode) in 3 of them\n")
    assert ("advice store the images at 0.5 of their side in 3 of them, median price 2.00x "
            "(1.60x-2.50x)") in head
    latest = {"verdict": {"advice": [{"setting": "image-side", "value": "0.5",
                                      "predicted_speedup": 1.6},
                                     {"setting": "preprocess-threads", "value": "4",
                                      "predicted_speedup": 1.3}]}}
    annotate_advice(latest, s)
    first, second = latest["verdict"]["advice"]
    assert first["predicted_speedup_recent_median"] == 2.0 and first["recent_passes"] == 3
    assert "predicted_speedup_recent_median" not in second


def test_the_summary_keeps_the_last_eight_passes_and_analyzes_each_once():
    recent = RecentPasses()
    records = [_FakeRecord(1000.0 + e, "cpu-bound", "decode", []) for e in range(12)]
    for epoch, r in enumerate(records):
        recent.add(epoch, r)
    assert recent.summary()["epochs"] == list(range(4, 12))
    recent.summary()
    assert [r.calls for r in records] == [0] * 4 + [1] * 8


@pytest.fixture
def small_dataset(tmp_path):
    rng = np.random.default_rng(0)
    out = str(tmp_path / "ds")
    sluice.write_dataset(out, "train", rng.integers(0, 256, (2048, 8, 8), dtype=np.uint8),
                         rng.integers(0, 10, 2048).astype(np.uint8))
    return out


def test_a_loader_reports_its_recent_passes_from_the_third_finished_one(small_dataset):
    loader = sluice.Loader(small_dataset, batch_size=64)
    for epoch in range(5):
        for _ in loader:
            pass
        report = loader.report()
        if epoch < 3:  # passes 1 and 2 after the cold one: too few
            assert "recent_passes" not in report
            assert "recent passes:" not in loader.report_text()
    s = report["recent_passes"]
    assert s["passes"] == 4 and s["epochs"] == [1, 2, 3, 4]
    assert sum(v["passes"] for v in s["verdicts"]) == 4
    rates = s["measured_samples_per_s"]
    assert 0 < rates["min"] <= rates["median"] <= rates["max"]
    # The latest pass is one of them, measured alike.
    assert rates["min"] <= report["measured_samples_per_s"] <= rates["max"]
    text = loader.report_text()
    assert "recent passes: the last 4 finished (epochs 1-4" in text
    assert text.startswith("over the last 4 passes: ")


def test_a_pass_left_early_is_not_a_recent_pass(small_dataset):
    loader = sluice.Loader(small_dataset, batch_size=64)
    for _ in range(4):
        for _ in loader:
            pass
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert loader.report()["recent_passes"]["epochs"] == [1, 2, 3]
