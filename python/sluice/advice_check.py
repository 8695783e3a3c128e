"""Loader.report(check_advice=True): each piece of the report's advice rerun as an experiment
on a bounded span of the loader, your step simulated as a sleep, with the rate before and after
(docs/python.md; sluice-train's --check-advice)."""
# TODO(issue 33): bind engine/job/advice_check.cc instead
import time

# The Loader argument each advice setting names (docs/report-schema.md, verdict.advice[]).
_ADVICE_ARGUMENTS = {"read-ahead": "read_ahead_frames", "decompress-threads": "decompress_threads",
                     "preprocess-threads": "preprocess_threads", "pool-size": "pool_size",
                     "device-ring-depth": "device_ring_depth"}
# Why the others are not rerun here.
_ADVICE_NOT_RUN = {
    "h2d-format": "dtype changes what your step receives (it must normalize on the device): "
                  "a rerun without your step cannot measure it",
    "cuda-graph": "a setting of sluice-train's CUDA backend, not of the loader",
    "zstd-level": "a setting of the dataset (sluice-shard create), not of the loader"}


def _step_seconds(report):
    """Your step's mean time in the reported pass: the compute stage's busy time per step."""
    steps = report.get("steps", 0)
    for row in report["stages"]:
        if row["stage"] == "compute" and steps > 0:
            return row["busy_ns"] / 1e9 / steps
    return 0.0


def _span_rate(arguments, steps, step_seconds):
    """Samples/s of the first `steps` batches of epoch 0 on a Loader with `arguments`, each
    followed by a sleep of `step_seconds` in place of the training step."""
    from .loader import Loader  # here, not above: loader.py imports this module
    loader = Loader(**arguments)
    samples = 0
    start = time.perf_counter()
    for index, (images, _labels) in enumerate(loader):
        samples += images.shape[0]
        if step_seconds > 0:
            time.sleep(step_seconds)
        if index + 1 >= steps:
            break
    seconds = time.perf_counter() - start
    loader._pass.cancel()
    return samples / seconds if seconds > 0 else 0.0


def _check_advice(arguments, report, steps, rounds):
    """Each piece of report's advice rerun as an experiment (Loader.report(check_advice=True))."""
    if steps < 1 or rounds < 1:
        raise ValueError("check_advice: steps and rounds must be >= 1, got %r and %r"
                         % (steps, rounds))
    step_seconds = _step_seconds(report)
    checks = []
    for advice in report["verdict"]["advice"]:
        check = {"setting": advice["setting"], "value": advice["value"], "text": advice["text"],
                 "note": "", "before_samples_per_s": 0.0, "after_samples_per_s": 0.0,
                 "speedup": 0.0, "steps": steps, "step_seconds": step_seconds}
        name = _ADVICE_ARGUMENTS.get(advice["setting"])
        if name is None:
            check["note"] = _ADVICE_NOT_RUN.get(advice["setting"], "not a Loader argument")
            checks.append(check)
            continue
        after = dict(arguments, **{name: int(advice["value"])})
        for _ in range(rounds):
            check["before_samples_per_s"] = max(check["before_samples_per_s"],
                                                _span_rate(arguments, steps, step_seconds))
            check["after_samples_per_s"] = max(check["after_samples_per_s"],
                                               _span_rate(after, steps, step_seconds))
        if check["before_samples_per_s"] > 0:
            check["speedup"] = check["after_samples_per_s"] / check["before_samples_per_s"]
        checks.append(check)
    return checks


def _advice_check_text(checks, steps, rounds):
    if not checks:
        return "\ncheck-advice: the report suggests no change of an argument\n"
    lines = ["", "check-advice (each change against the loader as it was, %d batches with your "
             "step as a sleep, the better of %d runs each):" % (steps, rounds)]
    for c in checks:
        if c["note"]:
            lines.append("  %-28s not run: %s" % (c["text"], c["note"]))
            continue
        lines.append("  %-28s before %8.1f k  after %8.1f k samples/s  %.2fx%s" % (
            c["text"], c["before_samples_per_s"] / 1e3, c["after_samples_per_s"] / 1e3,
            c["speedup"], "" if c["speedup"] >= 1.1 else
            "  (less than 1.1x: this advice did not pay here)"))
    return "\n".join(lines) + "\n"
