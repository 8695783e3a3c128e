"""Loader.report(check_advice=True): each piece of the report's advice rerun as an experiment
on a bounded span of the loader, your step simulated as a sleep, with the rate before and after
(docs/python.md; sluice-train's --check-advice).

The decisions are C++'s, shared with sluice-train (engine/job/advice_rerun.h, bound in
python/src/advice_check.cc): which advice a Loader rerun can change and why not the rest, the
rounds of before and after and the better rate of each, the step simulated, and the text. Only
the span stays here: it iterates a new Loader from Python (its batches as torch tensors, your
step as time.sleep), which is what the check measures and which C++ cannot run itself."""
import time

from . import _sluice
from ._args import _INT64_MAX, _int_arg

_MAX_ROUNDS = 2**31 - 1  # C++'s int (engine/job/advice_rerun.h)


def _step_seconds(report):
    """Your step's mean time in the reported pass: the compute stage's busy time per step."""
    return _sluice.step_seconds(report)


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
    # An argument check, in Python as the package's others are: TypeError or ValueError naming
    # the argument, never pybind11's conversion error (which echoed the whole report).
    steps = _int_arg("steps", steps, 1, _INT64_MAX, meaning=" (batches of each rerun)")
    rounds = _int_arg("rounds", rounds, 1, _MAX_ROUNDS, meaning=" (reruns of each advice)")
    step_seconds = _step_seconds(report)

    def run_span(change):
        """The span as the loader was (change None) or with change = (argument, value)."""
        after = arguments if change is None else dict(arguments, **{change[0]: change[1]})
        return _span_rate(after, steps, step_seconds)

    return _sluice.check_advice(report, steps, rounds, run_span)


def _advice_check_text(checks, steps, rounds):
    return _sluice.advice_check_text(checks, steps, rounds)
