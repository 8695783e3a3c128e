"""sluice.probe: the bottleneck report of any loader around your own training step.

    p = sluice.probe(dataloader)           # a torch DataLoader, or any iterable of batches
    for x, y in p:                         # your loop, unchanged
        step(x, y)
    for x, y in p.replay(steps=50):        # the what-if: the same step on one cached batch
        step(x, y)
    print(p.report_text())                 # loader or compute; "replacing the loader could
                                           # reach up to X samples/s (Y x)"

Per step the probe measures the exposed wait (the time blocked in next() of the wrapped
iterator) and the step time (from next() returning to the following next() call). The span the
report covers is each pass's first next() to its last step's end; the measured rate is samples
/ that span. The report, its verdict and its JSON are the C++ report's
(report/analysis/loader_probe.h; docs/bottleneck.md, "Any loader: sluice.probe").
"""
import json
import resource
import time

import torch

from . import _sluice
from ._args import _MAX_BATCH_SIZE, _int_arg, _printable, _type_name

__all__ = ["probe", "Probe"]


def _count_samples(batch):
    """Samples in a batch: the length of its first tensor (or array), searching tuples, lists
    and dicts in order; None when there is none."""
    if isinstance(batch, torch.Tensor) or hasattr(batch, "shape"):
        return int(batch.shape[0]) if len(batch.shape) > 0 else None
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (tuple, list)):
        for item in batch:
            n = _count_samples(item)
            if n is not None:
                return n
    return None


def _uncountable(batch):
    """Why _count_samples(batch) found no count: "a 0-d tensor has no batch dimension" when
    the first tensor or array it holds is a scalar, else "no tensor or array in it"."""
    if isinstance(batch, torch.Tensor) or hasattr(batch, "shape"):
        return ("it is a 0-d %s (shape ()): a 0-d tensor has no batch dimension"
                % _type_name(batch))
    items = list(batch.values()) if isinstance(batch, dict) else batch
    if isinstance(items, (tuple, list)):
        for item in items:
            if isinstance(item, torch.Tensor) or hasattr(item, "shape"):
                return ("its first tensor is a 0-d %s (shape ()): a 0-d tensor has no batch "
                        "dimension" % _type_name(item))
            if isinstance(item, (tuple, list, dict)) and _has_tensor(item):
                return _uncountable(item)
    return "no tensor or array in it"


def _has_tensor(batch):
    if isinstance(batch, torch.Tensor) or hasattr(batch, "shape"):
        return True
    items = list(batch.values()) if isinstance(batch, dict) else batch
    return isinstance(items, (tuple, list)) and any(_has_tensor(item) for item in items)


def _describe(iterable):
    """The loader's name for the report: its type, and num_workers for a DataLoader."""
    kind = type(iterable)
    name = "%s.%s" % (kind.__module__, kind.__qualname__)
    workers = getattr(iterable, "num_workers", None)
    return name if workers is None else "%s (num_workers=%d)" % (name, workers)


def _synchronize_cuda():
    # A step that enqueued CUDA work has not finished until the device has: the last step's end
    # is taken after it, so the span covers the work of every counted step.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class _Clock:
    """Steps of one kind (the real loader, or the replay): a step's wait is counted together
    with the step when the loop asks for the next batch, so wait + step is the span exactly."""

    def __init__(self):
        self.steps = self.samples = self.wait_ns = self.step_ns = self.max_wait_ns = 0
        self._pending = None  # (returned_at, wait_ns, samples) of the batch being stepped on

    def entered(self, now):
        if self._pending is not None:
            returned_at, wait, samples = self._pending
            self.steps += 1
            self.samples += samples
            self.wait_ns += wait
            self.step_ns += now - returned_at
            self.max_wait_ns = max(self.max_wait_ns, wait)
            self._pending = None

    def drop_unfinished(self):
        # A pass left by a `break`: its last step never ended, and the time until the next pass
        # starts is not a step.
        self._pending = None

    def returned(self, entered_at, now, samples):
        self._pending = (now, now - entered_at, samples)


class Probe:
    """Wraps `iterable` (a DataLoader, or any iterable of batches). Iterate it as the iterable
    itself; each iteration is one pass over it. `batch_size`: the samples per batch when the
    batch holds no tensor to count (default: the length of the batch's first tensor). `name`:
    the loader's name in the report (a str; default: the iterable's class), printed bounded
    and escaped."""

    def __init__(self, iterable, batch_size=None, name=None):
        self._iterable = iterable
        self._batch_size = _int_arg("batch_size", batch_size, 1, _MAX_BATCH_SIZE, none_ok=True)
        if name is not None and not isinstance(name, str):
            raise TypeError("name: expected a str or None, got %s (%s)" % (_printable(name),
                                                                         _type_name(name)))
        # Printed by the report bounded and escaped (report/analysis/loader_probe.cc), as is
        # the class's name that stands in for it.
        # A lone surrogate cannot reach C++ as UTF-8: written as its escape.
        self._name = (name or _describe(iterable)).encode("utf-8", "backslashreplace").decode()
        self._run = _Clock()
        self._replay = _Clock()
        self._replay_batch = ""
        self._passes = 0
        self._first = None  # the first batch seen
        # The last batch seen of the largest size seen: an epoch's short final batch (8 of 128
        # samples) would spread the step's fixed costs over few samples and understate the
        # free-data rate several times over.
        self._last = None
        self._last_samples = 0
        self._replay_cpu_ns = 0  # the process's CPU time during the replays
        self._replay_sys_ns = 0  # of it, in the kernel
        self._replay_faults = 0  # page faults during the replays
        self._switch = None  # (samples, span ns, CPU ns) of measure_switch

    def _samples(self, batch):
        if self._batch_size is not None:
            return self._batch_size
        n = _count_samples(batch)
        if n is None:
            raise ValueError("probe: cannot count the samples of a batch of type %s (%s); pass "
                             "batch_size=" % (_type_name(batch), _uncountable(batch)))
        return n

    def __iter__(self):
        self._run.drop_unfinished()
        return _ProbeIterator(self, iter(self._iterable))

    def __len__(self):
        return len(self._iterable)

    def replay(self, steps=50, batch="last"):
        """The what-if with free data: an iterator that yields one cached batch (`batch`:
        "last" or "first" seen by the probe; "last" skips a short final batch: it is the last
        batch of the largest size seen) `steps` times, timing your step on it. Run your
        own step in the loop; the report then predicts the rate without the loader's wait.
        Replays of the same batch add up (short ones interleaved with other work give one
        rate); a replay of the other batch starts the figures anew."""
        steps = _int_arg("replay: steps", steps, 1)
        if batch not in ("first", "last"):
            raise ValueError("replay: batch must be 'first' or 'last', got %s" % _printable(batch))
        cached = self._first if batch == "first" else self._last
        if cached is None:
            raise ValueError("replay: the probe has not seen a batch yet; iterate it first")
        if batch != self._replay_batch:
            self._replay = _Clock()
            self._replay_batch = batch
            self._replay_cpu_ns = self._replay_sys_ns = self._replay_faults = 0
        self._replay.drop_unfinished()
        return _ReplayIterator(self, cached, steps, self._samples(cached))

    def measure_switch(self, loader, batches=None):
        """The switch, measured before it is made: iterates `loader` (the sluice.Loader you
        would switch to: your data, your transforms, your batch size) alone, without a step,
        for `batches` batches (default: one whole pass, the steadiest figure), timing it and
        the process's CPU time from the start of the iteration. With a replay, the report then
        predicts the rate after switching from sluice's rate alone, its CPU time per sample
        and your step's (the replay's) on the same cores: "switching to sluice.Loader is
        predicted at ...". The window starts with the iteration, because the pipeline works
        ahead: a window opened at the first batch would miss the work done before it. A window
        shorter than a pass also counts the work ahead of its last batch (CPU per sample
        overstated a little). The CPU time is the process's: other threads of this process
        still working then count too."""
        batches = _int_arg("measure_switch: batches", batches, 1, none_ok=True)
        samples = count = 0
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        for batch in loader:
            count += 1
            n = _count_samples(batch)  # the new loader's own batches, not batch_size=
            if n is None:
                raise ValueError("measure_switch: cannot count the samples of a batch of type "
                                 "%s (%s)" % (_type_name(batch), _uncountable(batch)))
            samples += n
            if batches is not None and count >= batches:
                break
        if samples == 0:
            raise ValueError("measure_switch: the loader gave no batch")
        self._switch = (samples, time.perf_counter_ns() - wall, time.process_time_ns() - cpu)

    def _analyze(self):
        r, q = self._run, self._replay
        switch = self._switch or (0, 0, 0)
        return _sluice.analyze_probe(
            self._name, self._passes, r.steps, r.samples, r.wait_ns, r.step_ns, r.max_wait_ns,
            q.steps, q.samples, q.wait_ns + q.step_ns, self._replay_batch if q.steps else "",
            0, self._replay_cpu_ns if q.steps else 0, switch[0], switch[1], switch[2],
            self._replay_sys_ns if q.steps else 0, self._replay_faults if q.steps else 0)

    def report(self):
        """The report as a dict: the schema of sluice-train --report-json
        (docs/report-schema.md) with two stages, loader and compute, and a "probe" object."""
        return json.loads(self._analyze()[0])

    def report_text(self):
        """The report's rows, rates, verdict and notes, as text."""
        return self._analyze()[1]


class _ProbeIterator:
    def __init__(self, probe, inner):
        self._probe = probe
        self._inner = inner
        self._counted_pass = False

    def __iter__(self):
        return self

    def __next__(self):
        probe = self._probe
        entered = time.perf_counter_ns()  # the end of the step on the previous batch
        try:
            batch = next(self._inner)
        except StopIteration:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                _synchronize_cuda()
                entered = time.perf_counter_ns()
            probe._run.entered(entered)
            raise
        now = time.perf_counter_ns()
        probe._run.entered(entered)
        samples = probe._samples(batch)
        if not self._counted_pass:
            probe._passes += 1
            self._counted_pass = True
        if probe._first is None:
            probe._first = batch
        if samples >= probe._last_samples:
            probe._last, probe._last_samples = batch, samples
        probe._run.returned(entered, now, samples)
        return batch


class _ReplayIterator:
    # The process's CPU time between consecutive next() calls is the step's on that batch.
    def __init__(self, probe, batch, steps, samples):
        self._probe = probe
        self._clock = probe._replay
        self._batch = batch
        self._left = steps
        self._samples = samples
        self._cpu_mark = None  # the process's CPU time at the previous next()

    def __iter__(self):
        return self

    def _count_cpu(self):
        # CPU time from getrusage, so that the kernel's share and the page faults come from the
        # same reading (the step's allocator state: docs/bottleneck.md, "Any loader").
        u = resource.getrusage(resource.RUSAGE_SELF)
        now = (int(round(u.ru_utime * 1e9)) + int(round(u.ru_stime * 1e9)),
               int(round(u.ru_stime * 1e9)), u.ru_minflt + u.ru_majflt)
        if self._cpu_mark is not None:
            probe = self._probe
            probe._replay_cpu_ns += now[0] - self._cpu_mark[0]
            probe._replay_sys_ns += now[1] - self._cpu_mark[1]
            probe._replay_faults += now[2] - self._cpu_mark[2]
        self._cpu_mark = now

    def __next__(self):
        if self._left == 0:
            _synchronize_cuda()
            self._clock.entered(time.perf_counter_ns())
            self._count_cpu()
            self._cpu_mark = None
            raise StopIteration
        # The step on the previous batch ended here: its CPU time counts, as its time does (a
        # `break` leaves the last step out of both).
        self._count_cpu()
        entered = time.perf_counter_ns()
        self._clock.entered(entered)
        self._left -= 1
        self._clock.returned(entered, time.perf_counter_ns(), self._samples)
        return self._batch


def probe(iterable, batch_size=None, name=None):
    """Wraps any iterable of batches (a torch DataLoader, another library's iterator) so that
    iterating it measures the loader's exposed wait and your step's time; see Probe."""
    return Probe(iterable, batch_size=batch_size, name=name)
