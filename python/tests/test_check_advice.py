"""report(check_advice=True): each piece of the verdict's advice rerun as an experiment on a
bounded span of the loader (your step simulated as a sleep), with the measured before and after.
Rates are not asserted against a target (a timed test); what is pinned is that each change is
run with the named Loader argument, and what cannot be run says why."""
import sluice
from sluice import _check_advice, _step_seconds


def _report(loader):
    for _ in loader:
        pass
    return loader.report()


def _with_advice(report, *advice):
    report = dict(report)
    report["verdict"] = dict(report["verdict"], advice=[
        {"setting": s, "value": v, "text": t, "why": "", "predicted_speedup": 1.25 + i}
        for i, (s, v, t) in enumerate(advice)])
    return report


def test_each_loader_argument_is_rerun_before_and_after(fashion):
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100,
                           decompress_threads=1)
    report = _with_advice(_report(loader),
                          ("decompress-threads", "2", "decompress_threads=2"),
                          ("read-ahead", "8", "read_ahead_frames=8"))
    checks = _check_advice(loader._arguments, report, steps=20, rounds=1)
    assert [c["text"] for c in checks] == ["decompress_threads=2", "read_ahead_frames=8"]
    for c in checks:
        assert c["note"] == ""
        assert c["before_samples_per_s"] > 0 and c["after_samples_per_s"] > 0
        assert c["speedup"] == c["after_samples_per_s"] / c["before_samples_per_s"]
        assert c["steps"] == 20
    # Each check carries its entry's prediction, to read against the measured speedup.
    assert [c["predicted_speedup"] for c in checks] == [1.25, 2.25]


def test_advice_a_rerun_cannot_measure_says_why(fashion):
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100)
    report = _with_advice(_report(loader), ("h2d-format", "u8", "dtype=torch.uint8"),
                          ("zstd-level", "1", "sluice-shard create --zstd-level=1"))
    checks = _check_advice(loader._arguments, report, steps=5, rounds=1)
    assert "dtype changes what your step receives" in checks[0]["note"]
    assert "sluice-shard create" in checks[1]["note"]
    assert all(c["before_samples_per_s"] == 0 for c in checks)


def test_report_carries_advice_check_and_text_prints_it(fashion):
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100)
    _report(loader)
    report = loader.report(check_advice=True, steps=10, rounds=1)
    assert len(report["advice_check"]) == len(report["verdict"]["advice"])
    text = loader.report_text(check_advice=True, steps=10, rounds=1)
    assert "check-advice" in text


def test_the_simulated_step_is_the_measured_step_time(fashion):
    loader = sluice.Loader(fashion["dir"] + "/test.manifest.json", batch_size=100)
    report = _report(loader)
    compute = next(r for r in report["stages"] if r["stage"] == "compute")
    assert _step_seconds(report) == compute["busy_ns"] / 1e9 / report["steps"]
